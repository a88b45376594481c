"""The harness of the GUI benchmark (:mod:`bench.gui_bench`): a timed
QApplication, event-loop waits, and the window set-up its cases share.

How time is taken: the QApplication is subclassed so that ``notify`` records
every top-level event the GUI thread handles (start, end, whether a window
was painted in it). A *redraw* is the update call plus the GUI-thread time
of every event until the loop is quiet (layout, paint, flush). *Painted at*
is the end of the last event that painted a window.

Importing this module sets up the run's scratch folder and Qt's settings
folder (``XDG_CONFIG_HOME``) before PySide6 is imported: import it before
anything that imports Qt.
"""

from __future__ import annotations

import atexit
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Callable

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
# One scratch folder for this run: the generated models, and Qt's settings, so the
# bench's models never land in the user's Open recent list; removed at exit.
SCRATCH = Path(tempfile.mkdtemp(prefix="hookscope-guibench-"))
atexit.register(shutil.rmtree, SCRATCH, ignore_errors=True)
os.environ["XDG_CONFIG_HOME"] = str(SCRATCH / "config")

from PySide6.QtCore import QEvent, QEventLoop, Qt, QTimer  # noqa: E402
from PySide6.QtWidgets import QApplication  # noqa: E402


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


class ClockedApp(QApplication):
    """A QApplication that times the top-level events the GUI thread handles."""

    def __init__(self, argv: list[str]) -> None:
        super().__init__(argv)
        self.gui_ident = threading.get_ident()
        self._depth = 0
        self._painted = False
        self.busy: list[tuple[float, float]] = []   # (start, end) of top-level events
        self.paints: list[float] = []               # end of each top-level event that painted
        self.long_events: list[tuple[float, str, str]] = []  # (ms, event, receiver) over 10 ms
        # Wakes spin()'s blocking wait; its ticks are not the app's work, so not recorded.
        self.waker = QTimer()
        self.waker.setTimerType(Qt.TimerType.PreciseTimer)
        self.waker.setInterval(2)

    def notify(self, obj, ev) -> bool:  # noqa: D401 - Qt override
        if obj is self.waker or threading.get_ident() != self.gui_ident:
            return super().notify(obj, ev)
        etype = ev.type()
        paint = etype == QEvent.Type.UpdateRequest
        self._depth += 1
        t0 = time.perf_counter()
        try:
            return super().notify(obj, ev)
        finally:
            self._depth -= 1
            self._painted |= paint
            if self._depth == 0:
                t1 = time.perf_counter()
                self.busy.append((t0, t1))
                if t1 - t0 > 0.010:  # for the notes: what held the GUI thread
                    self.long_events.append((round((t1 - t0) * 1e3, 1), etype.name,
                                             type(obj).__name__))
                if self._painted:
                    self.paints.append(t1)
                self._painted = False

    def reset(self) -> None:
        self.busy.clear()
        self.paints.clear()
        self.long_events.clear()

    def longest(self, n: int = 3) -> str:
        top = sorted(self.long_events, reverse=True)[:n]
        return ", ".join(f"{ms} ms {ev} on {who}" for ms, ev, who in top) or "none over 10 ms"


def spin(pred: Callable[[], bool], timeout_s: float) -> bool:
    """Run the event loop until ``pred()`` or ``timeout_s``, blocking between events.

    ``processEvents`` with a time limit never blocks, and a busy loop here would
    take a core from the worker's forward: the loop sleeps in the event
    dispatcher, woken at least every 2 ms by the app's uncounted ``waker`` timer.
    """
    app = QApplication.instance()
    waker = getattr(app, "waker", None)
    if waker is not None:
        waker.start()
    deadline = time.monotonic() + timeout_s
    try:
        while not pred():
            if time.monotonic() > deadline:
                return False
            if waker is not None:
                QApplication.processEvents(QEventLoop.ProcessEventsFlag.WaitForMoreEvents)
            else:
                QApplication.processEvents(QEventLoop.ProcessEventsFlag.AllEvents, 2)
        return True
    finally:
        if waker is not None:
            waker.stop()


def settle(app: ClockedApp, quiet_ms: float = 40.0, timeout_s: float = 10.0) -> None:
    """Run the event loop until no GUI event has ended for ``quiet_ms``."""
    start = time.perf_counter()
    deadline = start + timeout_s

    def quiet() -> bool:
        last = app.busy[-1][1] if app.busy else start
        now = time.perf_counter()
        return now - max(last, start) > quiet_ms / 1e3 or now > deadline

    spin(quiet, timeout_s + 1)


def pause(ms: float) -> None:
    """Run the event loop for ``ms`` (while a timer ticks, the loop is never quiet)."""
    end = time.perf_counter() + ms / 1e3
    spin(lambda: time.perf_counter() > end, ms / 1e3 + 1)


def busy_ms(app: ClockedApp, since: float) -> float:
    return sum(e - max(s, since) for s, e in app.busy if e > since) * 1e3


def summary(values: list[float]) -> dict:
    v = sorted(values)
    return {"n": len(v), "median_ms": round(statistics.median(v), 3), "worst_ms": round(v[-1], 3),
            "best_ms": round(v[0], 3)}


def open_window(argv: list[str], size=(1400, 900)):
    from hookscope.app import create_window

    win = create_window(argv)
    win.resize(*size)
    win.show()
    if not spin(lambda: win.last_result is not None and win.is_idle(), 600):
        raise RuntimeError(f"first run of {argv[0]} did not finish: {win.error_text()}")
    if win.error_text():
        raise RuntimeError(win.error_text())
    return win


def run_and_wait(app: ClockedApp, win) -> object:
    runs = win.worker.runs_done
    win.request_run()
    spin(lambda: win.worker.runs_done > runs and win.is_idle(), 600)
    settle(app)
    return win.last_result


def write_factory(text: str, name: str) -> str:
    src = Path(tempfile.mkdtemp(prefix="model-", dir=SCRATCH)) / f"{name}.py"
    src.write_text(text)
    return f"{src}:make"


def bound_step(win, path: str, lo: float, hi: float) -> None:
    """One step of a bound drag, written as the histogram's bound lines write it:
    the layer's clamp in the window's session, merged with the drag's other steps."""
    from hookscope.core import Clamp

    win.session.intervene(path, Clamp(lo, hi), merge=path)


def redraw_ms(app: ClockedApp, action: Callable[[], None]) -> float:
    """Update call + GUI-thread time until the loop is quiet (layout, paint, flush)."""
    settle(app, 20)
    app.reset()
    t0 = time.perf_counter()
    action()
    t1 = time.perf_counter()
    settle(app)
    return (t1 - t0) * 1e3 + busy_ms(app, t1)


# -- Live latency: when a result was shown and painted ----------------------------
class ResultWatch:
    """When the window showed a result whose plan has ``path``'s high bound ``hi``."""

    def __init__(self, win, path: str) -> None:
        self.path, self.want, self.shown_at = path, None, None
        win.resultShown.connect(self._on_result)

    def _on_result(self, result) -> None:
        if self.want is not None and result.plan.clamp.get(self.path, (0, None))[1] == self.want:
            self.shown_at = time.perf_counter()

    def arm(self, hi: float) -> None:
        self.want, self.shown_at = hi, None


def painted_after(app: ClockedApp, t: float) -> float:
    """End of the last window paint after ``t`` (``t`` itself if none)."""
    return max([p for p in app.paints if p >= t], default=t)
