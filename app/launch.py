"""Starting the window: ``create_window(argv)`` and the ``hookscope [SPEC] ...`` entry.

``create_window`` builds the window exactly as the command line would (for
tests and for embedding; it needs a QApplication and starts no event loop).
``gui_main`` owns the QApplication and the event loop, and implements
``--screenshot FILE``: run once, render the window at 1400×900 to a PNG, exit.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

from hookscope.core import HookscopeError, Plan, resolve_device

from .demo_setup import default_plan
from .options import add_model_options, model_options

DEFAULT_SPEC = "demo:clamp"
SCREENSHOT_SIZE = (1400, 900)
EXIT_USER_ERROR = 2


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="hookscope",
        description="Open the Hookscope window. With no model, opens demo:clamp set up as "
                    "exercise 1 (layer 0 clamped to [-0.5, 0.5]). 'hookscope run ...' runs "
                    "without a window.")
    add_model_options(p, spec_required=False)
    p.add_argument("--live", action="store_true", help="start with Live mode on")
    p.add_argument("--screenshot", metavar="FILE",
                   help="run once, save the window (1400x900) as a PNG to FILE and exit")
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
    try:
        opts = model_options(ns)
        plan: Plan | None = opts.plan() if (opts.capture or opts.clamp) else None
        stats_only = opts.stats_only
    except HookscopeError as exc:  # a malformed --clamp: show it, open without the plan
        errors.append(str(exc))
        opts, plan, stats_only = None, None, ns.stats_only
    win = MainWindow(stats_only=stats_only)
    spec = ns.spec or DEFAULT_SPEC
    if plan is None:
        plan = default_plan(spec)
    try:
        resolve_device(ns.device)
        if not win.run_bar.set_device(ns.device):
            raise HookscopeError(f"device {ns.device!r} is not in this machine's list; using CPU")
    except HookscopeError as exc:
        errors.append(str(exc))
    win.train_mode = ns.train
    win.load(spec, ns.weights, ns.input, plan, ns.trust_pickle)
    if ns.live:
        win.set_live(True)
    for msg in errors:
        win.show_error(msg, sticky=True)
    win.startup_errors = errors
    return win


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
    win.worker.failed.connect(loop.quit)
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
        for sig in (win.resultShown, win.errorShown, win.worker.failed):
            sig.disconnect(loop.quit)


def save_screenshot(win, path: str, timeout_s: float = 300.0) -> int:
    """Run once, render ``win`` at 1400×900 to ``path``; exit status (2 on a user error)."""
    from PySide6.QtWidgets import QApplication

    win.resize(*SCREENSHOT_SIZE)
    win.show()
    if not wait_idle(win, timeout_s):
        print("hookscope: error: the run did not finish in time; no screenshot", file=sys.stderr)
        return 1
    errors = list(getattr(win, "startup_errors", [])) or ([win.error_text()] if win.error_text() else [])
    if errors:
        for msg in errors:
            print(f"hookscope: error: {msg}", file=sys.stderr)
        return EXIT_USER_ERROR
    for _ in range(3):  # let layouts and plots settle at the final size
        QApplication.processEvents()
    if not win.grab().save(path, "PNG"):
        print(f"hookscope: error: cannot write {path}", file=sys.stderr)
        return EXIT_USER_ERROR
    print(path)
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
    from .qt_compat import guard_none_refcount

    guard_none_refcount()
    from PySide6.QtWidgets import QApplication

    app = QApplication.instance() or QApplication([sys.argv[0] if sys.argv else "hookscope"])
    app.setApplicationName("Hookscope")
    app.setOrganizationName("Hookscope")
    win = create_window(argv)
    try:
        if ns.screenshot:
            return save_screenshot(win, ns.screenshot)
        win.resize(*SCREENSHOT_SIZE)
        win.show()
        return int(app.exec())
    finally:
        win.shutdown()
        win.close()
