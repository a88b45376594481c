"""A short Live soak of the window: a few hundred bound changes made with the mouse.

Live is switched on with a click; ``conv1``'s high bound line is dragged back
and forth with real mouse events at its on-screen position (the driver is
tests/support/live_soak.py; bench/live_soak.py's longer run prints the same figures). Afterwards:
the final plot and the plan show the last bound and the numbers ``compare()``
gives for it, no hook is left on any module, memory stayed flat over the
second half, and the window still runs normally.
"""

from __future__ import annotations

import gc
import math
import tracemalloc

import torch
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication, QPushButton

from hookscope.core import Plan, compare, load_model

from support.live_soak import LAYER, rss_mib, soak_drags

CHANGES = 200
HEAP_GROWTH_LIMIT = 512 * 1024    # Python heap over the second half (leaked results would be MiBs)
RSS_GROWTH_LIMIT_MIB = 24.0       # resident set over the second half (allocator slack allowed)


def _hook_counts(module) -> dict[str, tuple[int, int]]:
    return {name: (len(m._forward_hooks), len(m._forward_pre_hooks))
            for name, m in module.named_modules()}


def test_a_live_soak_of_mouse_drags_ends_on_the_last_bound_and_leaks_nothing(make_window, qtbot):
    win = make_window(["demo:cnn", "--capture", LAYER])
    qtbot.waitUntil(lambda: win.last_result is not None and win.is_idle(), timeout=60_000)
    module = win.loaded.module
    hooks_before = _hook_counts(module)
    qtbot.mouseClick(win.run_bar.live_toggle, Qt.MouseButton.LeftButton)
    assert win.is_live()
    qtbot.waitUntil(win.is_idle, timeout=30_000)

    def settle() -> None:
        qtbot.waitUntil(win.is_idle, timeout=60_000)

    marks: dict[str, float] = {}

    def on_half() -> None:  # count from here: the first half warmed every cache
        settle()
        gc.collect()
        marks["rss"] = rss_mib()
        tracemalloc.start()

    try:
        figs = soak_drags(win, CHANGES, pump=QApplication.processEvents, settle=settle,
                          on_half=on_half)
        gc.collect()
        heap_growth = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    rss_growth = rss_mib() - marks["rss"]

    assert figs.changes >= CHANGES, figs   # a few hundred changes reached the session
    assert figs.runs_failed == 0 and figs.runs_done >= 1, figs
    assert heap_growth < HEAP_GROWTH_LIMIT, f"Python heap grew {heap_growth / 1024:.0f} KiB"
    assert rss_growth < RSS_GROWTH_LIMIT_MIB, f"resident set grew {rss_growth:.1f} MiB"
    assert _hook_counts(module) == hooks_before     # no hook left behind by any of the runs

    # The final plot shows the last bound, and the numbers compare() gives for it.
    hi = figs.last_hi
    bounds = (-math.inf, hi)
    r = win.last_result
    assert win.session.plan.clamp[LAYER] == bounds and r.plan.clamp[LAYER] == bounds
    panel = win.panel.panels()[(LAYER, 0)]
    rec = r.captures[LAYER][0]
    assert panel.record is rec and panel.bounds() == bounds
    assert float(panel.hi_line.value()) == hi
    ref = load_model("demo:cnn")
    want = compare(ref.module, ref.example_input, Plan(capture=(LAYER,), clamp={LAYER: bounds}))
    assert rec.stats.max <= float(torch.tensor(hi, dtype=torch.float32))  # hi as float32 holds it
    assert math.isclose(rec.stats.max, want.captures[LAYER][0].stats.max, rel_tol=1e-6)
    assert (r.output_with == want.output_with).all()

    # Still usable: Live off, a normal Run gives a new result with the same numbers.
    qtbot.mouseClick(win.run_bar.live_toggle, Qt.MouseButton.LeftButton)
    assert not win.is_live()
    done = win.worker.runs_done
    with qtbot.waitSignal(win.resultShown, timeout=30_000):
        qtbot.mouseClick(win.findChild(QPushButton, "runButton"), Qt.MouseButton.LeftButton)
    qtbot.waitUntil(win.is_idle, timeout=30_000)
    again = win.last_result
    assert again is not r and win.worker.runs_done == done + 1
    assert again.plan.clamp[LAYER] == bounds and (again.output_with == r.output_with).all()
    assert win.banner.isHidden()  # no error on the way
    assert _hook_counts(module) == hooks_before
