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

The driver (``soak_drags``) is the test suite's (tests/support/live_soak.py),
whose short soak (tests/reliability/test_live_soak.py) asserts on the same figures.
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
import time
import tracemalloc

from tests.support.live_soak import LAYER, WINDOW_ARGS, rss_mib, soak_drags

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
