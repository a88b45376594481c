"""Live mode: bursts are coalesced, a dragged bound reaches the session, the tree and the plots,
and closing the window while a forward runs is clean."""

import math
from pathlib import Path

import pytest
from support.mouse_events import drag_line
from PySide6.QtWidgets import QApplication

from hookscope.core import Clamp
from hookscope.widgets.layer_tree_model import COL_HI, COL_LO

# A factory whose forward waits at a gate the test opens (see gated_model.py).
GATED_SPEC = f"{Path(__file__).with_name('gated_model.py')}:make"


def wait_idle_result(qtbot, win, timeout=30_000):
    qtbot.waitUntil(lambda: win.last_result is not None and win.is_idle(), timeout=timeout)
    return win.last_result


@pytest.fixture
def gated(make_window, qtbot):
    """A live window on a model whose forward the test can hold at a gate."""
    win = make_window([GATED_SPEC, "--capture", "lin", "--clamp", "lin=-1:1", "--live"])
    wait_idle_result(qtbot, win)
    model = win.loaded.module
    yield win, model
    model.release.set()  # never leave the worker stuck at the gate


def test_burst_of_50_changes_runs_far_fewer_and_ends_on_the_last(gated, qtbot):
    win, model = gated
    done0 = win.worker.runs_done
    model.release.clear()
    model.entered.clear()
    his = [0.1 + 0.01 * i for i in range(50)]
    for i, hi in enumerate(his):
        win.session.intervene("lin", Clamp(-1.0, hi))
        QApplication.processEvents()  # the live timer fires; a request goes to the worker
        if i == 0:
            assert model.entered.wait(30)  # the first run is now held in flight
    model.release.set()
    qtbot.waitUntil(lambda: win.is_idle() and win.last_result.plan.clamp["lin"][1] == his[-1],
                    timeout=30_000)
    runs = win.worker.runs_done - done0
    assert 1 <= runs <= 3, runs  # the held one, the newest, maybe nothing between
    assert win.worker.runs_dropped >= 45
    rec = win.last_result.captures["lin"][0]
    assert rec.stats.max <= his[-1] + 1e-6
    assert win.panel.panels()[("lin", 0)].record is rec


def _hist_panel(win, qtbot, path):
    panel = win.panel.panels()[(path, 0)]
    qtbot.waitExposed(panel)
    panel.grab()   # painted once at its final size
    return panel


def test_dragging_a_bound_sets_the_tree_and_reruns_while_dragging(window, qtbot):
    window.set_live(True)
    qtbot.waitUntil(window.is_idle, timeout=30_000)
    first = window.last_result
    panel = _hist_panel(window, qtbot, "0")
    steps = []
    window.session.subscribe(lambda ev: steps.append(ev.request_id) if ev.kind == "plan" else None)
    submitted = window.session.newest_run
    # A real drag of the high bound from 0.5 down to ~0.3: press, moves, release.
    drag_line(panel.hist_widget, panel.hi_line, 0.3)
    lo, hi = window.session.plan.clamp["0"]
    assert lo == -0.5 and hi == pytest.approx(0.3, abs=0.05)
    assert len(steps) >= 3                      # every step of the drag reached the session
    assert window.session.newest_run != submitted   # ... and Live re-ran while dragging
    model = window.tree.model
    assert float(model.data(model.index_for_path("0", COL_LO))) == -0.5
    assert float(model.data(model.index_for_path("0", COL_HI))) == hi
    qtbot.waitUntil(lambda: window.is_idle()
                    and window.last_result.plan.clamp["0"] == (-0.5, hi), timeout=30_000)
    r = window.last_result
    assert r is not first
    panel = window.panel.panels()[("0", 0)]
    assert panel.record is r.captures["0"][0]
    assert math.isclose(panel.record.stats.max, hi, rel_tol=1e-6)
    assert panel.bounds() == (-0.5, hi)
    without, with_ = window.outputs.values()
    assert not (with_ == first.output_with.reshape(-1).numpy()).all()


def test_drag_without_live_changes_clamp_but_does_not_run(window, qtbot):
    done = window.worker.runs_done
    panel = _hist_panel(window, qtbot, "0")
    drag_line(panel.hist_widget, panel.lo_line, -0.2)
    lo = window.session.plan.clamp["0"][0]
    assert lo == pytest.approx(-0.2, abs=0.05)
    QApplication.processEvents()
    assert window.is_idle() and window.worker.runs_done == done
    assert dict(window.tree.model.plan().clamp) == {"0": (lo, 0.5)}
    with qtbot.waitSignal(window.resultShown, timeout=30_000):
        window.request_run()
    assert window.last_result.plan.clamp["0"] == (lo, 0.5)


def test_ticking_a_layer_in_live_mode_runs(window, qtbot):
    window.set_live(True)
    qtbot.waitUntil(window.is_idle, timeout=30_000)
    window.tree.model.set_capture("1", True)
    qtbot.waitUntil(lambda: window.is_idle() and "1" in window.last_result.captures, timeout=30_000)
    assert ("1", 0) in window.panel.panels()


def test_closing_during_a_run_is_clean(gated, qtbot):
    win, model = gated
    shown = []
    win.resultShown.connect(shown.append)
    done = win.worker.runs_done
    model.release.clear()
    model.entered.clear()
    win.request_run()
    assert model.entered.wait(30)      # a forward is in flight, held at the gate
    win.request_run()                  # and one more is pending
    model.release.set()                # the held forward may finish while close waits
    win.close()
    assert not win.worker.is_running   # the thread ended; close waited for it
    # The held run may finish (a run the plots waited for is kept) and the pending
    # one may start before close: never more, and nothing is shown after close.
    assert win.worker.runs_done <= done + 2
    QApplication.processEvents()
    assert shown == []                 # nothing reached the closed window


def test_cnn_drag_on_conv1_changes_feature_maps_and_scores(make_window, qtbot):
    """Live mode end to end: dragging a bound on conv1's histogram changes the feature
    maps downstream and the class scores, with no Run pressed."""
    win = make_window(["demo:cnn", "--capture", "conv1,relu1,fc", "--live"])
    qtbot.waitUntil(lambda: win.last_result is not None and win.is_idle(), timeout=30_000)
    before = win.last_result
    relu_before = win.panel.panels()[("relu1", 0)].record.tensor.clone()
    _, scores_before = win.outputs.values()
    # conv1 has no clamp yet: its lines are open ends at the plot's edges; the user
    # drags the high one in with the mouse.
    panel = _hist_panel(win, qtbot, "conv1")
    drag_line(panel.hist_widget, panel.hi_line, 0.2)
    lo, hi = win.session.plan.clamp["conv1"]
    assert lo == -math.inf and hi == pytest.approx(0.2, abs=0.06)
    qtbot.waitUntil(lambda: win.is_idle() and win.last_result is not before
                    and win.last_result.plan.clamp.get("conv1") == (lo, hi), timeout=30_000)
    r = win.last_result
    model = win.tree.model
    assert float(model.data(model.index_for_path("conv1", COL_HI))) == hi
    assert win.panel.panels()[("conv1", 0)].record.stats.max <= hi + 1e-6
    relu_after = win.panel.panels()[("relu1", 0)].record.tensor
    assert not (relu_after == relu_before).all()          # feature maps downstream changed
    _, scores_after = win.outputs.values()
    assert not (scores_after == scores_before).all()      # and so did the class scores
    assert r.outputs_differ


def test_a_drag_on_a_layer_with_another_intervention_says_it_replaced_it(make_window, qtbot):
    """Layer 0 holds a scale: dragging a bound there makes it a clamp (one intervention a
    layer). The status bar says what was replaced; Edit → Undo (Ctrl+Z) brings it back."""
    from PySide6.QtCore import Qt

    from hookscope.core import Scale

    win = make_window(["demo:clamp", "--capture", "0", "--intervene", "0=scale:2"])
    qtbot.waitUntil(lambda: win.last_result is not None and win.is_idle(), timeout=30_000)
    panel = _hist_panel(win, qtbot, "0")
    assert win.session.plan.intervention_for("0") == Scale(2.0)
    lo, hi = panel.lo_line.value(), panel.hi_line.value()
    drag_line(panel.hist_widget, panel.hi_line, lo + 0.6 * (hi - lo) if hi > lo else 0.3)
    new = win.session.plan.intervention_for("0")
    assert new.name == "clamp"
    message = win.statusBar().currentMessage()
    assert message.startswith("0: the clamp replaced scale") and "Edit → Undo" in message
    win.activateWindow()
    qtbot.keyClick(win, Qt.Key.Key_Z, Qt.KeyboardModifier.ControlModifier)
    qtbot.waitUntil(lambda: win.session.plan.intervention_for("0") == Scale(2.0))
