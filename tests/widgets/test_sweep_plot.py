"""The sweep's plot on its own: colours that mean something (diverging around zero for
numbers of both signs, sequential otherwise, grey for cells not run yet), labels that never
overlap, a read-out under the mouse and a click that names the cell; a curve for one axis."""

from __future__ import annotations

import math

import numpy as np
import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QColor, QFontMetrics
from PySide6.QtTest import QTest

from hookscope.core import load_model
from hookscope.core.analyses import SweepResult, sweep
from hookscope.widgets.sweep_labels import short
from hookscope.widgets.sweep_plot import DIVERGING, NOT_RUN, SEQUENTIAL, SweepPlot
from support.keys import choose
from support.mouse_events import hover


def grid(values, rows, cols, metric="logit-diff:#1,#2", baseline=0.25):
    v = np.asarray(values, dtype=float)
    return SweepResult(v, {"layer": list(rows), "pos": list(cols)},
                       {"layer": list(rows), "pos": list(range(len(cols)))}, metric, baseline, {})


@pytest.fixture
def plot(qtbot):
    p = SweepPlot()
    qtbot.addWidget(p)
    p.resize(700, 420)
    p.show()
    qtbot.waitExposed(p)
    return p


def _pixel(plot, row, col) -> QColor:
    plot.graphics.viewport().repaint()
    img = plot.graphics.grab().toImage()
    pos = plot.graphics.mapFromScene(plot.cell_center(row, col))
    return QColor(img.pixel(pos))


def test_mixed_signs_diverge_around_zero_and_cells_not_run_are_grey(plot):
    r = grid([[-2.0, 1.0, 0.0], [0.5, np.nan, 2.0]], ["blocks.0", "blocks.1"],
             ["0 'a'", "1 'b'", "2 'c'"])
    plot.show_result(r)
    assert plot.image.levels.tolist() == [-2.0, 2.0]
    assert plot.colour_bar.levels() == (-2.0, 2.0)
    assert plot.plot.titleLabel.text.endswith("(5 of 6 cells)")
    grey = _pixel(plot, 1, 1)
    assert (grey.red(), grey.green(), grey.blue()) == (NOT_RUN.red(), NOT_RUN.green(), NOT_RUN.blue())
    lo, hi, zero = _pixel(plot, 0, 0), _pixel(plot, 1, 2), _pixel(plot, 0, 2)
    assert lo.blue() > lo.red() and hi.red() > hi.blue()     # blue below zero, red above
    assert min(zero.red(), zero.green(), zero.blue()) > 200  # zero is (near) white
    plot.show_result(grid([[0.1, 0.3], [0.2, 0.9]], ["a", "b"], ["x", "y"]))
    assert plot.image.levels.tolist() == [0.1, 0.9]
    dark, bright = _pixel(plot, 0, 0), _pixel(plot, 1, 1)
    assert dark.lightness() < bright.lightness()   # sequential: larger reads brighter
    assert DIVERGING != SEQUENTIAL


def test_long_token_labels_are_thinned_never_overlapping(plot):
    cols = [f"{i} {'word' * 3!r}" for i in range(60)]
    plot.show_result(grid(np.arange(120.0).reshape(2, 60), ["blocks.0", "blocks.1"], cols))
    axis = plot.bottom
    width = axis.geometry().width()
    (spacing, ticks), = axis.tickValues(-0.5, 59.5, width)
    px_per_cell = width / 60
    need = QFontMetrics(axis.font()).horizontalAdvance(short(cols[0]))
    assert spacing > 1 and spacing * px_per_cell >= need
    assert axis.tickStrings(ticks[:2], 1, spacing) == [short(cols[int(t)]) for t in ticks[:2]]
    assert all(len(s) <= 18 for s in axis.tickStrings(ticks, 1, spacing))


def test_hover_reads_the_cell_and_a_click_names_it(plot, qtbot):
    r = grid([[-2.0, 1.0, 0.0], [0.5, np.nan, 2.0]], ["blocks.0", "blocks.1"],
             ["0 'a'", "1 'b'", "2 'c'"])
    plot.show_result(r)
    g = plot.graphics
    hover(g, g.mapFromScene(plot.cell_center(0, 2)))
    assert plot.readout.text() == ("layer blocks.0 · pos 2 'c': logit-diff:#1,#2 = 0 "
                                   "(baseline 0.25)")
    assert plot.hover_mark.isVisible()
    hover(g, g.mapFromScene(plot.cell_center(1, 1)))
    assert plot.readout.text().endswith("= not run yet (baseline 0.25)")
    pos = g.mapFromScene(plot.cell_center(1, 2))
    with qtbot.waitSignal(plot.cellChosen) as sig:
        QTest.mouseClick(g.viewport(), Qt.MouseButton.LeftButton, pos=pos)
    assert sig.args == [1, 2] and plot.chosen == (1, 2) and plot.marker.isVisible()
    # the same grid filling in keeps the marker; a new shape drops it
    plot.show_result(grid([[-2.0, 1.0, 0.0], [0.5, 3.0, 2.0]], ["blocks.0", "blocks.1"],
                          ["0 'a'", "1 'b'", "2 'c'"]))
    assert plot.chosen == (1, 2)
    plot.show_result(grid([[1.0]], ["x"], ["y"]))
    assert plot.chosen is None and not plot.marker.isVisible()


def test_one_axis_draws_a_curve_with_its_baseline(plot, qtbot):
    cnn = load_model("demo:cnn")
    res = sweep(cnn.module, cnn.example_input, {"factor": "linspace(0,2,5)"},
                {"conv2": "scale:{factor}"}, "prob:#7", meaning=cnn.meaning)
    plot.show_result(res)
    x, y = plot.curve.getData()
    assert x.tolist() == res.coords["factor"] and np.array_equal(y, res.values)
    assert plot.curve.isVisible() and not plot.image.isVisible() and not plot.colour_bar.isVisible()
    assert plot.baseline_line.isVisible() and plot.baseline_line.value() == res.baseline
    # factor 1 leaves the output as it was (batched rows: to float rounding)
    assert math.isclose(res.values[2], res.baseline, rel_tol=1e-6)
    assert plot.plot.getAxis("left").labelText == "prob:#7"
    g = plot.graphics
    pos = g.mapFromScene(plot.cell_center(3))
    hover(g, pos)
    assert plot.readout.text() == f"factor 1.5: prob:#7 = {res.values[3]:.6g} (baseline {res.baseline:.6g})"
    with qtbot.waitSignal(plot.cellChosen) as sig:
        QTest.mouseClick(g.viewport(), Qt.MouseButton.LeftButton, pos=pos)
    assert sig.args == [3, 0] and plot.point_mark.isVisible()


def test_a_layer_axis_curve_is_labelled_by_layer_names(plot):
    r = SweepResult(np.array([0.5, 1.5, 1.0]), {"layer": ["conv1", "conv2", "fc"]},
                    {"layer": ["conv1", "conv2", "fc"]}, "kl", None, {})
    plot.show_result(r)
    x, _ = plot.curve.getData()
    assert x.tolist() == [0.0, 1.0, 2.0] and plot.bottom.labels == ["conv1", "conv2", "fc"]
    assert not plot.baseline_line.isVisible()


def test_past_two_axes_the_columns_name_every_combination(plot):
    v = np.arange(12.0).reshape(2, 3, 2)
    r = SweepResult(v, {"layer": ["a", "b"], "pos": ["0", "1", "2"], "f": ["0.5", "1"]},
                    {"layer": ["a", "b"], "pos": [0, 1, 2], "f": [0.5, 1.0]}, "kl", None, {})
    plot.show_result(r)
    assert plot.bottom.labels == ["0 · 0.5", "0 · 1", "1 · 0.5", "1 · 1", "2 · 0.5", "2 · 1"]
    g = plot.graphics
    hover(g, g.mapFromScene(plot.cell_center(1, 3)))
    assert plot.readout.text() == f"layer b · pos · f 1 · 1: kl = {v[1, 1, 1]:.6g}"


def test_a_curve_over_an_input_set_shows_mean_and_spread_with_the_best_strength_starred(plot):
    import torch

    from hookscope.core import Add, parse_input

    lm = load_model("demo:lm")
    xs = [parse_input("text:" + t, lm.example_input, lm.meaning.codec)
          for t in ("the cat sat on", "a dog", "the quick brown fox")]
    v = torch.randn(lm.module.head.in_features, generator=torch.Generator().manual_seed(5))
    res = sweep(lm.module, None, {"alpha": "linspace(0,8,8)"},
                {"blocks.0": lambda alpha: Add(v, alpha)}, "logit:e", meaning=lm.meaning,
                input_set=xs)
    plot.show_result(res)
    x, y = plot.curve.getData()
    assert np.array_equal(y, res.values)   # the curve is the mean over the inputs
    bars = plot.spread.bars.opts
    assert plot.spread.bars.isVisible()
    assert np.array_equal(bars["height"], 2 * res.spread) and np.array_equal(bars["y"], res.values)
    best = int(np.argmax(res.values))
    assert plot.spread.best == best and plot.spread.best_mark.isVisible()
    bx, by = plot.spread.best_mark.getData()
    assert (bx[0], by[0]) == (x[best], y[best])
    g = plot.graphics
    hover(g, g.mapFromScene(plot.cell_center(best)))
    assert (f"= {res.values[best]:.6g} ± {res.spread[best]:.3g} over 3 inputs (the largest mean)"
            in plot.readout.text())
    plot.show_result(grid([[1.0, 2.0]], ["a"], ["p0", "p1"]))   # a heat map: no bars, no star
    assert not plot.spread.bars.isVisible() and not plot.spread.best_mark.isVisible()


def test_show_draws_one_row_of_a_grid_as_a_curve_and_a_click_names_its_cell(plot, qtbot):
    v = np.arange(12.0).reshape(2, 3, 2)
    r = SweepResult(v, {"layer": ["a", "b"], "pos": ["0", "1", "2"], "f": ["0.5", "1"]},
                    {"layer": ["a", "b"], "pos": [0, 1, 2], "f": [0.5, 1.0]}, "kl", None, {})
    plot.show_result(r)
    assert plot.show_row.isVisible() and plot.image.isVisible()
    box = plot.show_box
    assert [box.itemText(i) for i in range(box.count())] == [
        "heat map", "curve of layer a", "curve of layer b"]
    choose(box, "curve of layer b")
    assert plot.curve_row() == 1 and plot.is_curve() and not plot.image.isVisible()
    x, y = plot.curve.getData()
    # past two axes the columns are categories, labelled by their combinations
    assert x.tolist() == [0, 1, 2, 3, 4, 5] and np.array_equal(y, v[1].reshape(-1))
    assert plot.bottom.labels == ["0 · 0.5", "0 · 1", "1 · 0.5", "1 · 1", "2 · 0.5", "2 · 1"]
    assert not plot.spread.band.isVisible()   # one input: no spread to draw
    g = plot.graphics
    pos = g.mapFromScene(plot.cell_center(1, 3))
    hover(g, pos)
    assert plot.readout.text() == f"layer b · pos · f 1 · 1: kl = {v[1, 1, 1]:.6g}"
    with qtbot.waitSignal(plot.cellChosen) as sig:
        QTest.mouseClick(g.viewport(), Qt.MouseButton.LeftButton, pos=pos)
    assert sig.args == [1, 3] and plot.point_mark.isVisible()
    # the same grid again (cells arriving, or a new run of it) keeps the row; another
    # grid's rows reset it
    plot.show_result(r)
    assert box.currentText() == "curve of layer b"
    plot.show_result(None)
    assert not plot.show_row.isVisible()
    plot.show_result(r)
    assert box.currentText() == "curve of layer b" and plot.curve.isVisible()
    plot.show_result(grid([[1.0, 2.0]], ["c"], ["p0", "p1"]))
    assert box.currentText() == "heat map" and plot.image.isVisible()
    plot.show_result(SweepResult(np.arange(3.0), {"f": ["0", "1", "2"]}, {"f": [0, 1, 2]}, "kl",
                                 None, {}))
    assert not plot.show_row.isVisible()


def _star_cell(plot, i):
    """The cell (row, column) under the middle of the ``i``-th row-best star, and that
    pixel's colour as drawn."""
    plot.graphics.viewport().repaint()
    img = plot.graphics.grab().toImage()
    at = plot.plot.vb.mapViewToScene(plot.row_best_mark.points()[i].pos())
    return plot.cell_at(at), QColor(img.pixel(plot.graphics.mapFromScene(at)))


def test_a_heat_map_with_a_strength_axis_stars_each_rows_largest(plot, qtbot):
    cnn = load_model("demo:cnn")
    res = sweep(cnn.module, cnn.example_input,
                {"layer": "conv1,conv2,fc", "factor": "linspace(-1,2,4)"},
                {"{layer}": "scale:{factor}"}, "prob:#7", meaning=cnn.meaning)
    plot.show_result(res)
    assert plot.image.isVisible() and plot.row_best_mark.isVisible()
    want = {r: int(np.argmax(res.values[r])) for r in range(res.values.shape[0])
            if res.values[r].max() > res.values[r].min()}
    assert len(want) == 3 and plot.row_best == want
    stars = [_star_cell(plot, i) for i in range(len(plot.row_best_mark.points()))]
    # each star sits in its row's largest cell, drawn white on the cell's colour
    assert sorted(cell for cell, _ in stars) == sorted(want.items())
    assert all(min(c.red(), c.green(), c.blue()) > 230 for _, c in stars)
    assert all(_pixel(plot, r, c) != QColor(255, 255, 255) for r, c in want.items())
    g = plot.graphics
    for r, c in want.items():
        hover(g, g.mapFromScene(plot.cell_center(r, c)))
        assert plot.readout.text().endswith(
            f"= {res.values[r, c]:.6g} (the row's largest) (baseline {res.baseline:.6g})")
        other = (c + 1) % res.values.shape[1]
        hover(g, g.mapFromScene(plot.cell_center(r, other)))
        assert "largest" not in plot.readout.text()
    # a row's curve has no row stars; categories on both axes, or a row all equal, neither
    choose(plot.show_box, "curve of layer conv2")
    assert not plot.row_best_mark.isVisible() and plot.row_best == {}
    choose(plot.show_box, "heat map")
    assert plot.row_best_mark.isVisible()
    plot.show_result(SweepResult(np.array([[1.0, 3.0], [2.0, 2.0]]),
                                 {"layer": ["a", "b"], "head": ["h0", "h1"]},
                                 {"layer": ["a", "b"], "head": ["h0", "h1"]}, "kl", None, {}))
    assert plot.row_best == {} and not plot.row_best_mark.isVisible()
    plot.show_result(grid([[1.0, 3.0, np.nan], [2.0, 2.0, np.nan], [np.nan, 5.0, np.nan]],
                          ["a", "b", "c"], ["p0", "p1", "p2"]))
    assert plot.row_best == {0: 1}   # row b all equal, row c one cell run: no best yet
    # an estimated grid stars its rows' largest estimates, and says it is an estimate
    est = np.array([[0.5, 2.0, 1.0], [3.0, 1.0, 2.0]])
    r = grid(np.full((2, 3), np.nan), ["a", "b"], ["p0", "p1", "p2"])
    r.estimates = est
    plot.show_result(r)
    assert plot.row_best == {0: 1, 1: 0}
    g = plot.graphics
    hover(g, g.mapFromScene(plot.cell_center(1, 0)))
    assert plot.readout.text().endswith("≈ 3 (first-order estimate) (the row's largest estimate) "
                                        "(baseline 0.25)")
