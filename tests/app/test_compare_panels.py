"""After File → Compare with…, a click on a point of the Divergence dock shows that layer's
panel as model A against model B (the light series A, the dark B, in the same bins, their
difference in words), with the numbers two hand-hooked models give; an upstream layer is
equal in both; an intervention set on a panel applies to both models; a layer the run does
not capture gets a panel of its own; a row clicked in the tree is shown so too; Close
comparison brings the panels back to without/with.

Tolerances: the window runs its forwards on the runner's thread, the hand hooks on this
one; the same float32 kernels, compared to 1e-6 relative (never bit for bit)."""

from __future__ import annotations

import copy

import pytest
import torch
from PySide6.QtCore import Qt
from PySide6.QtTest import QTest

from hookscope.core import load_model
from tests.support.compare_window import (ROWS, click_point, cnn_window, compare_with,
                                         nudged_models, wait_pair)
from tests.support.mouse_events import drag_line
from tests.support.hand_hooks import hooked_outputs
from tests.support.screenshots import wanted, save_shot


def close(a, b):
    torch.testing.assert_close(a.float(), b.float(), rtol=1e-6, atol=1e-6)


def assert_shows(panel, want_a, want_b, b_name):
    rec = panel.record
    close(rec.baseline_tensor, want_a)   # light: model A
    close(rec.tensor, want_b)            # dark: model B
    edges_a, _ = panel.histogram._series["before"]
    edges_b, _ = panel.histogram._series["after"]
    assert edges_a.tolist() == edges_b.tolist()   # the same bins
    assert panel.hist_pre.isVisible() and panel.hist_post.isVisible()
    assert panel.histogram.names == ("A", "B")
    text = panel.stats_label.text()
    assert "<b>A</b> (light, demo:cnn)" in text and f"<b>B</b> (dark, {b_name})" in text
    diff = (want_b.double() - want_a.double())
    assert rec.pair.max_abs_diff == pytest.approx(float(diff.abs().max()), rel=1e-5, abs=1e-7)
    assert rec.pair.relative_change == pytest.approx(
        float(diff.norm() / want_a.double().norm()), rel=1e-5, abs=1e-9)
    return text


def test_a_divergence_click_shows_the_layer_as_model_a_against_model_b(make_window, qtbot,
                                                                       tmp_path):
    a, b, weights, x = nudged_models(tmp_path)
    hand_a, hand_b = hooked_outputs(a, x, ROWS), hooked_outputs(b, x, ROWS)

    win = cnn_window(make_window, qtbot)
    tool = compare_with(win, qtbot, weights=str(weights))

    # conv2, the nudged layer: A and B as two hand-hooked models give them
    panel = click_point(win, qtbot, "conv2")
    text = assert_shows(panel, hand_a["conv2"], hand_b["conv2"], "demo:cnn with nudged.pt")
    assert "B − A: max |B − A|" in text
    row = tool.result.layers[ROWS.index("conv2")]
    assert panel.record.pair.relative_change == pytest.approx(row.relative_change, rel=1e-5)
    assert win.tree.selected_path() == "conv2"
    assert (panel.view_widget.getPlotItem().getAxis("top")._tickLevels or [[]])[0] \
        or panel.view_kind == "feature_maps"   # its halves are named A and B (maps: below)

    if wanted():
        for w, h in ((1000, 650), (1400, 900)):
            win.resize(w, h)
            qtbot.wait(300)
            qtbot.waitUntil(win.is_idle, timeout=30_000)
            save_shot(win, f"compare_panels_{w}x{h}")
        win.resize(1000, 650)

    # conv1, before the nudge: the same in A and B, and said so
    panel = click_point(win, qtbot, "conv1")
    text = assert_shows(panel, hand_a["conv1"], hand_b["conv1"], "demo:cnn with nudged.pt")
    assert panel.record.pair.max_abs_diff == 0 and panel.record.pair.relative_change == 0
    assert "A and B are equal here" in text
    # conv2 is not selected any more: its panel shows the run without/with again
    assert win.panel.panels()[("conv2", 0)].record.pair is None

    # a clamp dragged on conv1's panel applies to both models
    panel.grab()   # painted at its final size: the line is where the mouse finds it
    drag_line(panel.hist_widget, panel.hi_line, 0.3)
    lo, hi = win.session.plan.clamp["conv1"]
    assert hi == pytest.approx(0.3, abs=0.1)
    QTest.mouseClick(win.run_bar.run_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: win.is_idle() and win.last_result.plan.clamp.get("conv1") == (lo, hi),
                    timeout=60_000)
    panel = wait_pair(win, qtbot, "conv1")
    clamped_a = hooked_outputs(a, x, ROWS, ("conv1", lo, hi))
    clamped_b = hooked_outputs(b, x, ROWS, ("conv1", lo, hi))
    assert_shows(panel, clamped_a["conv1"], clamped_b["conv1"], "demo:cnn with nudged.pt")
    top = torch.tensor(hi, dtype=torch.float32)   # the clamp's bound as float32 holds it
    assert panel.record.tensor.max() <= top and panel.record.baseline_tensor.max() <= top
    panel = click_point(win, qtbot, "conv2")   # downstream: both models ran with the clamp
    assert_shows(panel, clamped_a["conv2"], clamped_b["conv2"], "demo:cnn with nudged.pt")
    assert not torch.allclose(panel.record.baseline_tensor, hand_a["conv2"])

    # pool1 is not captured by the run: it gets a panel of its own while selected
    assert "pool1" not in win.last_result.captures
    panel = click_point(win, qtbot, "pool1")
    assert_shows(panel, clamped_a["pool1"], clamped_b["pool1"], "demo:cnn with nudged.pt")
    assert next(iter(win.panel.panels())) == ("pool1", 0)   # first in the column

    # a row clicked in the layer tree is shown as A against B too
    tree = win.tree
    idx = tree.proxy.mapFromSource(tree.model.index_for_path("relu2"))
    tree.view.scrollTo(idx)
    QTest.mouseClick(tree.view.viewport(), Qt.MouseButton.LeftButton,
                     pos=tree.view.visualRect(idx).center())
    panel = wait_pair(win, qtbot, "relu2")
    assert tool.view.chosen == ROWS.index("relu2")   # its point ringed in the Divergence dock
    assert_shows(panel, clamped_a["relu2"], clamped_b["relu2"], "demo:cnn with nudged.pt")
    assert ("pool1", 0) not in win.panel.panels()   # no longer selected: its panel went

    # Close comparison: without/with again, the uncaptured layer's panel gone, model B let go
    QTest.mouseClick(tool.view.close_button, Qt.MouseButton.LeftButton)
    assert not tool.dock.isVisible() and tool.result is None and not tool.cache.holds
    panels = win.panel.panels()
    assert ("relu2", 0) not in panels
    assert all(p.record.pair is None for p in panels.values())
    assert panels[("conv2", 0)].record is win.last_result.captures["conv2"][0]
    assert "(light," not in panels[("conv2", 0)].stats_label.text()
    # a later run (and a tree click) shows without/with too
    QTest.mouseClick(win.run_bar.run_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(win.is_idle, timeout=60_000)
    assert "diff_layers" not in win.last_result.extras
    assert all(p.record.pair is None for p in win.panel.panels().values())


def test_model_b_in_bfloat16_shows_its_own_values_against_a(make_window, qtbot):
    """B in bfloat16: its panel holds B's values (upcast exactly) against A's float32 ones;
    in Live, a bound dragged on that panel re-runs both models with the clamp."""
    lm = load_model("demo:cnn")
    a = lm.module.eval()
    b = copy.deepcopy(a).to(torch.bfloat16)
    x = lm.example_input
    hand_a = hooked_outputs(a, x, ["conv2"])
    hand_b = hooked_outputs(b, x.to(torch.bfloat16), ["conv2"])

    win = make_window(["demo:cnn"])
    qtbot.waitUntil(lambda: win.last_result is not None and win.is_idle(), timeout=60_000)
    compare_with(win, qtbot, dtype="bfloat16")
    panel = click_point(win, qtbot, "conv2")
    assert panel.record.tensor.dtype == torch.float32
    assert_shows(panel, hand_a["conv2"], hand_b["conv2"].float(), "demo:cnn in bfloat16")
    assert 1e-3 < panel.record.pair.relative_change < 5e-2   # bfloat16's rounding, not zero

    # Live: a bound dragged on the A/B panel re-runs both models with it as it moves
    QTest.mouseClick(win.run_bar.live_toggle, Qt.MouseButton.LeftButton)
    assert win.is_live()
    panel.grab()
    drag_line(panel.hist_widget, panel.lo_line, 0.0)
    lo, hi = win.session.plan.clamp["conv2"]
    qtbot.waitUntil(lambda: win.is_idle() and win.last_result.plan.clamp.get("conv2") == (lo, hi),
                    timeout=60_000)
    panel = wait_pair(win, qtbot, "conv2")
    # each model clamps in its own dtype: B at the bound as bfloat16 holds it
    assert panel.record.baseline_tensor.min() >= torch.tensor(lo, dtype=torch.float32)
    assert panel.record.tensor.min() >= torch.tensor(lo, dtype=torch.bfloat16).float()
    close(panel.record.baseline_tensor, hand_a["conv2"].clamp(lo, hi))
    close(panel.record.tensor, hand_b["conv2"].clamp(lo, hi).float())
