"""A Live soak of the window: many bound changes made with the mouse, then a look at what is left.

The window opens on ``demo:cnn`` with Live on (clicked, as a person would);
the high bound line of ``conv1``'s histogram is dragged back and forth with
real mouse events at its on-screen position (press, moves with the button
held, release), each move one bound change and so one Live request. At the
end it waits until idle and prints what the runner did (runs finished,
dropped as stale, failed), memory before and after (resident set, and the
Python heap when ``--tracemalloc`` is on), and whether the final plot shows
the last bound.

    python -m bench.live_soak --changes 1000

``soak_drags`` (the driver) is shared with the test suite's short soak
(tests/reliability/test_live_soak.py), which asserts on the same figures.
"""

from __future__ import annotations

import argparse
import gc
import math
import os
import sys
import time
import tracemalloc
from dataclasses import dataclass

LAYER = "conv1"
MOVES_PER_DRAG = 5          # mouse moves with the button held: one bound change each
PAUSE_EVERY = 4             # drags between two rests of the hand
WINDOW_ARGS = ["demo:cnn", "--capture", "conv1,relu1,fc"]


# -- the soak ---------------------------------------------------------------------
@dataclass
class SoakFigures:
    """What a soak did: bound changes sent, and the runner's counts over the soak."""

    changes: int = 0
    drags: int = 0
    runs_done: int = 0
    runs_dropped: int = 0
    runs_failed: int = 0
    last_hi: float = float("nan")


def targets(lo: float, hi: float, n: int) -> list[float]:
    """``n`` view x positions in the upper part of ``[lo, hi]``, never twice the same in a row."""
    span = hi - lo
    fractions = (0.9, 0.55, 0.8, 0.45, 0.7, 0.6, 0.85, 0.5)
    return [lo + fractions[i % len(fractions)] * span for i in range(n)]


def soak_drags(win, changes: int, pump, settle, pause_every: int = PAUSE_EVERY,
               on_half=None) -> SoakFigures:
    """Drag ``LAYER``'s high bound line until about ``changes`` bound changes were sent.

    ``pump()`` runs pending events (results arrive, the plot redraws) between
    drags; every ``pause_every`` drags the hand rests: ``settle()`` waits until
    the window is idle, so some runs finish and show while most are dropped as
    stale (without rests every run is replaced before it ends). ``on_half()``
    is called once half the changes are made (a test starts its memory count
    there). The counts are read after the last drag's run has finished.
    """
    from .mouse_events import drag_line  # Qt loads only when a soak runs

    panel = win.panel.panels()[(LAYER, 0)]
    widget, line = panel.hist_widget, panel.hi_line
    pre = panel.record.pre_stats or panel.record.stats  # before any clamp: the values as they are
    sent = [0, math.nan]  # changes seen reaching the session, the last high bound
    session = win.session

    def seen(_ev) -> None:
        bounds = session.plan.clamp.get(LAYER)
        if bounds is not None and bounds[1] != sent[1]:  # a plan edit elsewhere is no change
            sent[0] += 1
            sent[1] = bounds[1]

    unsubscribe = session.subscribe(seen)
    w = win.worker
    done0, dropped0, failed0 = w.runs_done, w.runs_dropped, w.runs_failed
    # Each drag makes up to MOVES_PER_DRAG changes (two moves may land on one pixel);
    # drag on until ``changes`` were made.
    xs = targets(pre.min, pre.max, 8)
    drags = 0
    half_called = False
    while sent[0] < changes and drags < 3 * changes:
        drag_line(widget, line, xs[drags % len(xs)], MOVES_PER_DRAG)
        drags += 1
        pump()
        if drags % pause_every == 0:
            settle()
        if on_half is not None and not half_called and sent[0] >= changes // 2:
            half_called = True
            on_half()
    settle()
    unsubscribe()
    return SoakFigures(changes=sent[0], drags=drags, runs_done=w.runs_done - done0,
                       runs_dropped=w.runs_dropped - dropped0, runs_failed=w.runs_failed - failed0,
                       last_hi=sent[1])


def rss_mib() -> float:
    """This process's resident set, MiB (Linux /proc; 0 where there is none)."""
    try:
        with open("/proc/self/status") as f:
            for row in f:
                if row.startswith("VmRSS:"):
                    return int(row.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def _wait(app, cond, timeout_s: float = 120.0) -> bool:
    from PySide6.QtTest import QTest

    deadline = time.monotonic() + timeout_s
    while not cond():
        if time.monotonic() > deadline:
            return False
        QTest.qWait(5)
    app.processEvents()
    return True


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.live_soak", description=__doc__.split("\n")[0])
    ap.add_argument("--changes", type=int, default=1000, help="bound changes to make (default 1000)")
    ap.add_argument("--tracemalloc", action="store_true",
                    help="also count the Python heap (slower: every allocation is traced)")
    ns = ap.parse_args(argv)
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    from PySide6.QtCore import Qt
    from PySide6.QtTest import QTest
    from PySide6.QtWidgets import QApplication

    from hookscope.app import create_window
    app = QApplication.instance() or QApplication(sys.argv[:1])
    # As the app's start-up (app/launch.py): reference cycles are collected on the GUI
    # thread only, by pyqtgraph's collector, never in the runner's thread mid-forward.
    from pyqtgraph.util.garbage_collector import GarbageCollector

    collector = GarbageCollector(interval=1.0)  # noqa: F841 - lives as long as main
    win = create_window(WINDOW_ARGS)
    win.resize(1200, 800)
    win.show()
    if not _wait(app, lambda: win.last_result is not None and win.is_idle()):
        print("the first result never came", file=sys.stderr)
        return 1
    QTest.mouseClick(win.run_bar.live_toggle, Qt.MouseButton.LeftButton)
    _wait(app, win.is_idle)
    gc.collect()
    if ns.tracemalloc:
        tracemalloc.start()
    heap0 = tracemalloc.get_traced_memory()[0] if ns.tracemalloc else 0
    rss0 = rss_mib()
    t0 = time.perf_counter()
    half: dict[str, float] = {}

    def on_half() -> None:
        _wait(app, win.is_idle, 600)
        gc.collect()
        half["rss"] = rss_mib()
        half["heap"] = tracemalloc.get_traced_memory()[0] if ns.tracemalloc else 0

    figs = soak_drags(win, ns.changes, pump=app.processEvents,
                      settle=lambda: _wait(app, win.is_idle, 600), on_half=on_half)
    wall = time.perf_counter() - t0
    gc.collect()
    rss1 = rss_mib()
    heap1 = tracemalloc.get_traced_memory()[0] if ns.tracemalloc else 0
    r = win.last_result
    rec = r.captures[LAYER][0]
    shown = win.panel.panels()[(LAYER, 0)]
    final_ok = (r.plan.clamp[LAYER][1] == figs.last_hi and float(shown.hi_line.value()) == figs.last_hi
                and shown.record is rec and rec.stats.max <= figs.last_hi + 1e-6)
    print(f"live soak on {' '.join(WINDOW_ARGS)}: {figs.changes} bound changes in {figs.drags} "
          f"mouse drags, {wall:.1f} s")
    print(f"runs finished {figs.runs_done}, dropped as stale {figs.runs_dropped}, "
          f"failed {figs.runs_failed}")
    print(f"memory (RSS) before {rss0:.1f} MiB, half-way {half['rss']:.1f} MiB, after {rss1:.1f} MiB "
          f"({rss1 - rss0:+.1f} MiB in all, {rss1 - half['rss']:+.1f} MiB over the second half)")
    if ns.tracemalloc:
        mib = 2**20
        print(f"Python heap (tracemalloc) before {heap0 / mib:.2f}, half-way {half['heap'] / mib:.2f}, "
              f"after {heap1 / mib:.2f} MiB ({(heap1 - half['heap']) / mib:+.2f} MiB over the "
              "second half)")
    print(f"final plot shows the last bound ({figs.last_hi:.4g}): {'yes' if final_ok else 'NO'}")
    win.shutdown()
    return 0 if final_ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
