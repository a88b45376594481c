"""Starting the window: ``create_window(argv)`` and the ``hookscope [SPEC] ...`` entry.

``create_window`` builds the window exactly as the command line would (for
tests and for embedding; it needs a QApplication and starts no event loop).
``gui_main`` owns the QApplication and the event loop, and implements
``--screenshot FILE [--size WxH]``: run once, render the window (1400×900 unless
told) to a PNG, exit.
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
import textwrap
import time
from dataclasses import replace

from hookscope.core import HookscopeError, Plan, resolve_device

from hookscope.core.model import CodeTrust
from hookscope.core.session import read_session_file
from hookscope.core.base import ReadFiles, one_line

from .demo_setup import default_plan, with_default_captures
from .arg_parser import OneLineParser
from .commands import commands_help
from .options import add_model_options, model_options
from .std_streams import data_stream
from .version import VersionAction

DEFAULT_SPEC = "demo:clamp"
SCREENSHOT_SIZE = (1400, 900)
EXIT_USER_ERROR = 2
INPUT_FORMS = """\
inputs (--input X):
  example                the model's own example input (the default)
  [[1.0, 2.0, 3.0]]      a Python literal; a tuple literal gives several inputs
  random:1x3x32x32       random values; add :seed=N, :dtype=D, :high=N (integers)
  file.npy / file.pt     a NumPy array, or tensors saved with torch.save
  digit.png              an image (png, jpg, bmp, gif, webp) shaped like the example
                         input, grey or RGB; add :invert for dark ink on a light page
  text:PROMPT            a prompt, tokenized by the model's tokenizer (hf: and demo:lm)

models (SPEC):
  demo:NAME              clamp, features, cnn, transformer, lm, detector
  path/to/file.py:f      a factory function in a file (returns a module, optionally
                         with an example input); --weights FILE for its state_dict
  package.module:f       a factory in an importable package
  model.pt2              a torch.export program
  hf:NAME_OR_DIR         a Hugging Face transformers model (a local folder or a cached name)
  torchvision:NAME[:pretrained]   a torchvision model, e.g. torchvision:resnet18
  timm:NAME[:pretrained]          a timm model, e.g. timm:resnet18

sessions:
  FILE.hookscope.json    a saved session (File > Save session): opens its model, input,
                         device, plan and view

"""


def parse_size(text: str) -> tuple[int, int]:
    """``'1000x650'`` -> ``(1000, 650)``; a malformed size is a usage error."""
    w, sep, h = text.lower().partition("x")
    try:
        size = (int(w), int(h))
    except ValueError:
        size = (0, 0)
    if not sep or not (320 <= size[0] <= 8192 and 240 <= size[1] <= 8192):
        raise argparse.ArgumentTypeError(f"{text!r}: write WIDTHxHEIGHT, e.g. 1000x650 "
                                         "(320x240 to 8192x8192)")
    return size


def build_parser() -> argparse.ArgumentParser:
    p = OneLineParser(
        prog="hookscope",
        description=textwrap.fill(
            "Open the Hookscope window on a model (SPEC) or a saved session "
            "(FILE.hookscope.json). With no model, opens demo:clamp set up as exercise 1 "
            "(layer 0 clamped to [-0.5, 0.5]).", 78) + "\n\n" + commands_help(),
        epilog=INPUT_FORMS, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--version", action=VersionAction)
    add_model_options(p, spec_required=False)
    p.add_argument("--live", action="store_true", help="start with Live mode on")
    p.add_argument("--screenshot", metavar="FILE",
                   help="run once, save the window as a PNG to FILE and exit")
    p.add_argument("--size", metavar="WxH", type=parse_size, default=SCREENSHOT_SIZE,
                   help="window size, e.g. 1000x650 (default 1400x900)")
    return p


def create_window(argv: list[str]):
    """Build the main window as ``hookscope ARGV...`` would, without starting the event loop.

    Needs an existing ``QApplication``. The model loads on the worker thread and
    the first run is requested as soon as it arrives; a mistake on the command
    line shows in the window's error banner instead of raising.
    """
    from .main_window import MainWindow

    ns = build_parser().parse_args(list(argv))
    errors: list[str] = []
    reads = ReadFiles("the open model")  # the vector files read here, before the session is
    try:
        opts = model_options(ns)
        wants_plan = bool(opts.capture or opts.clamp or opts.interventions)
        plan: Plan | None = opts.plan() if wants_plan else None
        if plan is not None and opts.vectors:  # files read now; diff: specs where the model runs
            from hookscope.core.analyses import resolve_vectors

            with reads.recording():
                plan = replace(plan, interventions=resolve_vectors(
                    None, plan.interventions, opts.vectors))
        stats_only = opts.stats_only
    except HookscopeError as exc:  # a malformed --clamp: show it, open without the plan
        errors.append(str(exc))
        opts, plan, stats_only = None, None, ns.stats_only
    factory = None
    try:
        from .scale_options import runner_factory_for, scale_options

        factory = runner_factory_for(scale_options(ns), ns.device)
    except HookscopeError as exc:  # Ray missing or not answering: the local runner, and say so
        errors.append(f"{exc}; running locally instead")
    win = MainWindow(stats_only=stats_only, runner_factory=factory)
    win.session.read_files.update(reads)
    spec = ns.spec or DEFAULT_SPEC
    if plan is None:
        plan = default_plan(spec)
    else:
        plan = with_default_captures(plan, spec)
    try:
        resolve_device(ns.device)
        if not win.run_bar.set_device(ns.device):
            raise HookscopeError(f"device {ns.device!r} is not in this machine's list; using CPU")
    except HookscopeError as exc:
        errors.append(str(exc))
    win.session.set_options(train=ns.train)  # loaded in eval; --train runs in train mode
    if spec.endswith(".json"):  # ``hookscope FILE.hookscope.json``: a saved session
        try:
            _open_session_file(win, spec, ns)
        except HookscopeError as exc:
            errors.append(f"could not open the session: {exc}")
            win.load(DEFAULT_SPEC, plan=default_plan(DEFAULT_SPEC))
    else:
        win.load(spec, ns.weights, ns.input, plan, ns.trust_code, labels=ns.labels)
    if ns.live:
        win.set_live(True)
    for msg in errors:
        win.show_error(msg, sticky=True)
    win.startup_errors = errors
    return win


def _open_session_file(win, path: str, ns: argparse.Namespace) -> None:
    """Open the session file ``path`` in ``win``. A model in it that runs code needs
    ``--trust-code``, or the person's yes: the window opens the default demo and asks
    (with ``--screenshot`` nobody is there to ask, so it is an error)."""
    setup = read_session_file(path)
    if ns.screenshot:  # nobody to ask: a refused load is the banner's error, exit status 2
        win.open_setup_with(setup, CodeTrust.from_data(everything=ns.trust_code))
        return

    def open_default() -> None:  # the window is usable behind the question
        win.load(DEFAULT_SPEC, plan=default_plan(DEFAULT_SPEC))

    opened = win.trust_gate.open(lambda t: win.open_setup_with(setup, t), ns.trust_code,
                                 asked_by=f"the session file {path}",
                                 instead=f"the window shows {DEFAULT_SPEC} (exercise 1) instead",
                                 meanwhile=open_default)
    if opened is None:  # refused before any load was made (the banner says why)
        open_default()


def wait_idle(win, timeout_s: float = 300.0) -> bool:
    """Run the event loop until the window has shown a result or an error and has
    nothing pending (for --screenshot)."""
    from PySide6.QtCore import QEventLoop, QTimer

    def done() -> bool:
        return win.is_idle() and (win.last_result is not None or bool(win.error_text()))

    deadline = time.monotonic() + timeout_s
    loop = QEventLoop()
    timer = QTimer(singleShot=True)
    timer.timeout.connect(loop.quit)
    win.resultShown.connect(loop.quit)
    win.errorShown.connect(loop.quit)
    win.idle.connect(loop.quit)
    try:
        while not done():
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            timer.start(int(min(left, 0.2) * 1000))  # re-check even if a signal was missed
            loop.exec()
        return True
    finally:
        timer.stop()
        for sig in (win.resultShown, win.errorShown, win.idle):
            sig.disconnect(loop.quit)


def save_screenshot(win, path: str, timeout_s: float = 300.0,
                    size: tuple[int, int] = SCREENSHOT_SIZE) -> int:
    """Run once, render ``win`` at ``size`` to ``path``; exit status (2 on a user error). An
    intervention alarm is drawn in the picture's banner and said as a note on stderr (0)."""
    from PySide6.QtWidgets import QApplication

    from .layout import arrange_docks

    win.remember_layout = False  # a screenshot neither uses nor overwrites the user's layout
    win.resize(*size)
    win.show()
    arrange_docks(win, force=True)  # the docks as a window of this size gets them
    if not wait_idle(win, timeout_s):
        print("hookscope: error: the run did not finish in time; no screenshot", file=sys.stderr)
        return 1
    errors = list(getattr(win, "startup_errors", [])) or ([win.error_text()] if win.error_text() else [])
    if errors:
        for msg in errors:
            print(f"hookscope: error: {one_line(msg)}", file=sys.stderr)
        return EXIT_USER_ERROR
    for _ in range(3):  # let layouts and plots settle at the final size
        QApplication.processEvents()
    from hookscope.widgets.plot_tools import save_png

    try:
        win.refuse_output("--screenshot", path)  # never over a file the window read
        save_png(win, path)  # whole or not at all
    except HookscopeError as exc:
        print(f"hookscope: error: {one_line(str(exc))}", file=sys.stderr)
        return EXIT_USER_ERROR
    print(one_line(path), file=data_stream())  # the data; talk goes to stderr
    if win.alarm_text():  # news about the plan, drawn in the picture's banner: not a failure
        print(f"hookscope: note: {one_line(win.alarm_text())}", file=sys.stderr)
    return 0


def gui_main(argv: list[str]) -> int:
    """``hookscope [SPEC] [options]``: open the window (or take a screenshot); exit status."""
    ns = build_parser().parse_args(list(argv))  # --help and usage errors before Qt loads
    has_display = bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))
    if ns.screenshot and not has_display:
        os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    elif (not has_display and sys.platform.startswith("linux")
          and not os.environ.get("QT_QPA_PLATFORM")):
        # Qt would abort here with a misleading note about xcb libraries.
        raise HookscopeError("no display to open a window on (DISPLAY and WAYLAND_DISPLAY are "
                             "unset): run it in a desktop session, or use 'hookscope run ...' "
                             "or '--screenshot FILE' without one")
    if has_display and not ns.screenshot:
        from .system_check import check

        status, message = check()   # Qt would abort naming the wrong library
        if status:
            raise HookscopeError(message.removeprefix("hookscope: "))
    from PySide6.QtWidgets import QApplication

    app = QApplication.instance() or QApplication([sys.argv[0] if sys.argv else "hookscope"])
    app.setApplicationName("Hookscope")
    app.setOrganizationName("Hookscope")
    # Collect reference cycles on the GUI thread only, on a timer: an automatic
    # collection can run in whichever thread allocates (the forward's worker), and a
    # Qt object in a cycle destroyed there crashes Qt. pyqtgraph's collector exists
    # for this; it follows gc's own thresholds, so a check costs little.
    from pyqtgraph.util.garbage_collector import GarbageCollector

    gc_was_enabled = gc.isenabled()
    collector = GarbageCollector(interval=1.0)
    win = create_window(argv)
    try:
        if ns.screenshot:
            from .qt_messages import offscreen_notes_dropped

            with offscreen_notes_dropped():  # stderr stays empty when all is well
                return save_screenshot(win, ns.screenshot, size=ns.size)
        win.resize(*ns.size)
        win.show()
        return int(app.exec())
    finally:
        win.shutdown()
        collector.timer.stop()
        if gc_was_enabled:  # as it was before the window: a caller's code runs on after it
            gc.enable()
        win.close()
        win.deleteLater()   # an embedding app (or a test) keeps running: the window must go
