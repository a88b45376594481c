"""The Sweep dock's Estimate and Verify top K, driven with real clicks: the heatmap fills with
first-order estimates equal to sweep(..., estimate=True) and is marked as estimates; the
cells verified run for real equal the exact sweep's values, are outlined, read out beside
their estimates and plotted against them with ρ; a metric the estimate refuses says why in
the dock and leaves it usable."""

from __future__ import annotations


import numpy as np
from PySide6.QtCore import Qt
from PySide6.QtTest import QTest

from hookscope.core import parse_input
from hookscope.core.analyses import EstimateRefused, check_estimable, spearman, sweep
from hookscope.widgets.sweep_plot import ESTIMATED
from support.mouse_events import hover
from hookscope.widgets.layer_tree_model import COL_LAYER
from support.window_menus import tree_context_menu
from support.keys import choose, retype
from support.screenshots import save_shot
from support.sweep_dock import fill_sweep, open_sweep_dock

PROMPT = "text:the cat sat on the "
SOURCE = "text:the dog sat on the "


def _done(win, view, before):
    return (view.result is not None and view.result is not before and win.is_idle()
            and view.run_button.isEnabled())


def _hover_reads(qtbot, plot, row, col, want):
    g = plot.graphics

    def moved():
        hover(g, g.mapFromScene(plot.cell_center(row, col)))
        return want in plot.readout.text()

    qtbot.waitUntil(moved, timeout=5_000)


def _patch_fields(qtbot, win):
    view = win.sweep_view
    fill_sweep(view, "layer=blocks.*; pos=all", "{layer}=patch@pos={pos}", source=SOURCE,
               metric=("logit-diff", "#3", "#5"))
    assert view.metric_box.text() == "logit-diff:#3,#5"
    return view


def test_estimate_fills_the_grid_and_verify_runs_the_top_cells(make_window, qtbot):
    win = make_window(["demo:lm", "--input", PROMPT])
    win.resize(1400, 900)
    open_sweep_dock(win, qtbot)
    view = _patch_fields(qtbot, win)
    lm = win.session.model
    x = parse_input(PROMPT, lm.example_input, lm.meaning.codec)
    over = {"layer": "blocks.*", "pos": "all"}
    intervene = {"{layer}": f"patch:{SOURCE}@pos={{pos}}"}
    metric = "logit-diff:#3,#5"

    QTest.mouseClick(view.estimate_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: _done(win, view, None), timeout=60_000)
    got = view.result
    want = sweep(lm.module, x, over, intervene, metric, meaning=lm.meaning, estimate=True)
    assert got.axes == want.axes and got.estimates is not None
    # another thread and another process state: a stated tolerance, not bit equality
    np.testing.assert_allclose(got.estimates, want.estimates, rtol=1e-5, atol=1e-6)
    assert np.isnan(got.values).all()   # nothing ran for real
    np.testing.assert_allclose(view.plot.image.image, got.estimates, rtol=0, atol=0)
    assert view.plot.estimated.isVisible()
    assert view.plot.estimated.text().startswith(ESTIMATED)
    assert "estimated to first order" in view.note.text()
    assert not view.scatter.isVisible() and not view.plot.verified_mark.isVisible()

    # Verify top K: K typed into the spin box, the K cells run for real
    spin = view.verify_k
    spin.setFocus()
    QTest.keyClick(spin, Qt.Key.Key_A, Qt.KeyboardModifier.ControlModifier)
    QTest.keyClicks(spin, "6")
    assert spin.value() == 6
    before = view.result
    QTest.mouseClick(view.verify_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: _done(win, view, before), timeout=60_000)
    got = view.result
    ver = got.verified
    cells = [tuple(c) for c in ver["cells"]]
    assert len(cells) == 6 and len(set(cells)) == 6
    # the cells verified are those with the largest estimated change from the baseline
    change = np.abs(got.estimates - got.baseline)
    assert min(change[c] for c in cells) >= np.sort(change.ravel())[-6] - 1e-9
    exact = sweep(lm.module, x, over, intervene, metric, meaning=lm.meaning)
    for c, v, e in zip(cells, ver["values"], ver["estimates"]):
        np.testing.assert_allclose(v, exact.values[c], rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(got.values[c], exact.values[c], rtol=1e-5, atol=1e-6)
        assert e == got.estimates[c]
    assert np.isnan(got.values).sum() == got.cells - 6
    assert ver["spearman"] == spearman(ver["estimates"], ver["values"])
    # shown: outlined cells, ρ in the note and the scatter, both numbers in the read-out
    assert sorted(view.plot.verified_cells()) == sorted(cells)
    assert view.plot.verified_mark.isVisible()
    rho = f"ρ = {ver['spearman']:.3f} over 6 cells"
    assert rho in view.note.text() and rho in view.scatter.plot.titleLabel.text
    assert view.plot.estimated.isVisible() and view.plot.estimated.text().startswith(
        f"{ESTIMATED}, 6 verified (outlined)")
    # a short dock (1400×900: the analysis tabs take at most 45 % of the height) shows the
    # scatter in a tab beside the grid's; a click on the tab shows it
    area = view.plot_area
    assert area.mode() == "tabs" and area.tabs.count() == 2
    assert area.tabs.currentWidget() is view.plot and not view.scatter.isVisible()
    bar = area.tabs.tabBar()
    assert bar.isVisible() and bar.tabText(1) == "Estimate vs run"
    QTest.mouseClick(bar, Qt.MouseButton.LeftButton, pos=bar.tabRect(1).center())
    qtbot.waitUntil(view.scatter.isVisible)
    sx, sy = view.scatter.points.getData()
    assert np.array_equal(sx, np.array(ver["estimates"])) and np.array_equal(
        sy, np.array(ver["values"]))
    QTest.mouseClick(bar, Qt.MouseButton.LeftButton, pos=bar.tabRect(0).center())
    qtbot.waitUntil(view.plot.isVisible)
    r, c = cells[0]
    _hover_reads(qtbot, view.plot, r, c,
                 f"≈ {got.estimates[r, c]:.6g} (first-order estimate), run: {got.values[r, c]:.6g}")
    # the picture: the dock made taller, as a person drags its edge to see grid and scatter
    win.resizeDocks([win.sweep_dock], [520], Qt.Orientation.Vertical)
    qtbot.waitUntil(lambda: win.sweep_dock.height() >= 500)
    # plots narrower than PLOTS_SIDE_BY_SIDE and taller than PLOTS_STACKED stack the
    # scatter under the grid, which fits
    qtbot.waitUntil(lambda: view.plots.orientation() == Qt.Orientation.Vertical)
    g = view.plot.graphics
    qtbot.waitUntil(lambda: view.plot.plot.sceneBoundingRect().right() <= g.viewport().width())
    save_shot(win, "estimate_verified_1400x900")


def test_an_estimate_of_one_axis_is_a_curve_with_the_verified_points(make_window, qtbot):
    win = make_window(["demo:lm", "--input", PROMPT])
    open_sweep_dock(win, qtbot)
    view = _patch_fields(qtbot, win)
    retype(view.axes, "f=linspace(0,2,5)")
    retype(view.template, "blocks.1=scale:{f}")
    retype(view.verify_k, "2")
    QTest.mouseClick(view.verify_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: _done(win, view, None), timeout=60_000)
    got = view.result
    lm = win.session.model
    x = parse_input(PROMPT, lm.example_input, lm.meaning.codec)
    want = sweep(lm.module, x, {"f": "linspace(0,2,5)"}, {"blocks.1": "scale:{f}"},
                 "logit-diff:#3,#5", meaning=lm.meaning, estimate=True)
    cx, cy = view.plot.curve.getData()
    np.testing.assert_allclose(cy, want.estimates, rtol=1e-5, atol=1e-6)
    assert cx.tolist() == [0.0, 0.5, 1.0, 1.5, 2.0]
    px, py = view.plot.verified_points.getData()
    rows = [c[0] for c in got.verified["cells"]]
    assert len(rows) == 2 and px.tolist() == [cx[r] for r in rows]
    assert np.array_equal(py, got.values[rows]) and view.plot.verified_points.isVisible()


def test_a_metric_the_estimate_refuses_says_why_in_the_dock(make_window, qtbot):
    win = make_window(["demo:lm", "--input", PROMPT])
    open_sweep_dock(win, qtbot)
    view = win.sweep_view
    retype(view.axes, "layer=blocks.*; pos=0:3")
    retype(view.template, "{layer}=zero@pos={pos}")
    choose(view.metric_box.kind, "kl")
    lm = win.session.model
    try:
        check_estimable(lm.module, "kl", lm.meaning)
    except EstimateRefused as exc:
        why = str(exc)
    else:
        raise AssertionError("kl should be refused")
    assert "\n" not in why
    QTest.mouseClick(view.estimate_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: view.note.text() == why, timeout=60_000)
    assert view.result is None and not view.scatter.isVisible()
    # still usable: the same grid runs for real
    assert view.run_button.isEnabled() and view.estimate_button.isEnabled()
    QTest.mouseClick(view.run_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: _done(win, view, None), timeout=60_000)
    assert view.result.estimates is None and np.isfinite(view.result.values).all()
    assert view.plot.estimated.isHidden()


def test_estimate_effects_on_the_tree_paints_each_layer_by_its_largest_estimate(make_window,
                                                                                 qtbot):
    win = make_window(["demo:lm", "--input", PROMPT])
    win.resize(1400, 900)
    open_sweep_dock(win, qtbot)
    view = _patch_fields(qtbot, win)
    menu = tree_context_menu(qtbot, win, "blocks.0.mlp")
    act = next(a for a in menu.actions() if a.objectName() == "actionEstimateEffects")
    assert act.text() == "Estimate effects of blocks.*.mlp"
    QTest.mouseClick(menu, Qt.MouseButton.LeftButton, pos=menu.actionGeometry(act).center())
    model = win.tree.model
    qtbot.waitUntil(lambda: bool(model.effects) and win.is_idle(), timeout=60_000)
    assert view.axes.text() == "layer=blocks.*.mlp; pos=all"
    lm = win.session.model
    x = parse_input(PROMPT, lm.example_input, lm.meaning.codec)
    want = sweep(lm.module, x, {"layer": "blocks.*.mlp", "pos": "all"},
                 {"{layer}": f"patch:{SOURCE}@pos={{pos}}"}, "logit-diff:#3,#5",
                 meaning=lm.meaning, estimate=True)
    largest = np.abs(want.estimates - want.baseline).max(axis=1)
    assert sorted(model.effects) == ["blocks.0.mlp", "blocks.1.mlp"]
    np.testing.assert_allclose([model.effects["blocks.0.mlp"], model.effects["blocks.1.mlp"]],
                               largest, rtol=1e-5, atol=1e-6)
    # the larger effect is painted the stronger; layers not estimated are not painted
    alpha = {p: model.data(model.index_for_path(p, COL_LAYER),
                           Qt.ItemDataRole.BackgroundRole).color().alpha()
             for p in model.effects}
    big, small = sorted(model.effects, key=model.effects.get, reverse=True)
    assert alpha[big] > alpha[small] > 0
    assert model.data(model.index_for_path("blocks.0.attn", COL_LAYER),
                      Qt.ItemDataRole.BackgroundRole) is None
    tip = model.data(model.index_for_path(big, COL_LAYER), Qt.ItemDataRole.ToolTipRole)
    assert f"largest estimated effect on logit-diff:#3,#5: {model.effects[big]:.4g}" in tip
    # the dock shows the same estimates
    np.testing.assert_allclose(view.result.estimates, want.estimates, rtol=1e-5, atol=1e-6)
    save_shot(win, "tree_effects_1400x900")
