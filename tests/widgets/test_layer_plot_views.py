"""What a LayerPlot shows, checked on its real state: view ranges, ticks,
label placement and item data (QA polish of the plots)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from PySide6.QtCore import QPointF

from hookscope.core import CaptureRecord, Plan, compare, load_model
from hookscope.core.engine.stats import summarize
from hookscope.widgets.layer_plot import LayerPlot



def _clamped(plot, bounds):
    """``plot`` with its layer clamped to ``bounds`` in its session's plan (the lines' source)."""
    from hookscope.core import Clamp

    plot.session.intervene(plot.path, Clamp(*bounds))
    return plot

def _record(values, pre=None, bounds=None, path="x") -> CaptureRecord:
    t = torch.as_tensor(values, dtype=torch.float32)
    t = t[None] if t.dim() == 1 else t
    kw = {}
    if pre is not None:
        p = torch.as_tensor(pre, dtype=torch.float32)
        p = p[None] if p.dim() == 1 else p
        kw = dict(pre_tensor=p, pre_stats=summarize(p).resolve(),
                  intervention=f"clamp({bounds[0]}, {bounds[1]})")
    return CaptureRecord(path, 0, stats=summarize(t).resolve(), tensor=t, **kw)


@pytest.fixture
def plot(qtbot):
    p = LayerPlot("x")
    qtbot.addWidget(p)
    p.resize(700, 320)
    p.show()
    qtbot.waitExposed(p)
    return p


def _y_range(p: LayerPlot) -> tuple[float, float]:
    return tuple(p.view_widget.getPlotItem().getViewBox().viewRange()[1])


def _x_range(p: LayerPlot) -> tuple[float, float]:
    return tuple(p.view_widget.getPlotItem().getViewBox().viewRange()[0])


def _inside(values, lo_hi) -> bool:
    lo, hi = lo_hi
    return all(lo <= v <= hi for v in values)


def test_bar_view_refits_when_new_values_leave_it(plot):
    plot.update_record(_record([-0.5, -0.3]))
    assert _inside([-0.5, -0.3, 0.0], _y_range(plot))
    # A new input: a positive value must not vanish above a range that ends at 0.
    plot.update_record(_record([-0.534, 0.274]))
    assert _inside([-0.534, 0.274], _y_range(plot))
    plot.update_record(_record([5.0, 1.0]))
    assert _inside([5.0, 1.0], _y_range(plot))
    # ... and much smaller values get a range that shows them, not a flat line.
    plot.update_record(_record([0.01, 0.02]))
    lo, hi = _y_range(plot)
    assert hi < 0.1


def test_bar_view_follows_a_clamp_that_moves_values_up(plot):
    pre = [1.42, 0.71, 2.2, 0.82]
    _clamped(plot, (-0.5, 0.5)).update_record(_record([0.5] * 4, pre, (-0.5, 0.5)))
    assert _inside(pre, _y_range(plot))
    # Low dragged past every value: all of them now sit at 3.1, above the old range.
    _clamped(plot, (3.1, 3.1)).update_record(_record([3.1] * 4, pre, (3.1, 3.1)))
    assert _inside([3.1] + pre, _y_range(plot))


def test_bar_view_stays_put_during_a_live_drag(plot):
    pre = [1.42, 0.71, 2.2, 0.82]
    _clamped(plot, (-0.5, 0.5)).update_record(_record([0.5] * 4, pre, (-0.5, 0.5)))
    first = _y_range(plot)
    for hi in (0.6, 0.9, 1.3, 2.0):
        post = [min(v, hi) for v in pre]
        _clamped(plot, (-0.5, hi)).update_record(_record(post, pre, (-0.5, hi)))
        assert _y_range(plot) == pytest.approx(first)


def test_bar_view_shows_every_bar_with_room(plot):
    plot.update_record(_record([0.3, -0.2, 1.0, 0.4]))
    x0, x1 = _x_range(plot)
    assert x0 <= -0.5 and x1 >= 3.5   # bar 3 spans [2.6, 3.4]
    plot.update_record(_record(list(range(10))))
    x0, x1 = _x_range(plot)
    assert x0 <= -0.5 and x1 >= 9.5


def _tick_values(axis, view_range, pixels=300) -> list[float]:
    return [v for _spacing, values in axis.tickValues(*view_range, pixels) for v in values]


def test_unit_axis_of_bars_has_whole_number_ticks(plot):
    plot.update_record(_record([0.3, -0.2, 1.0, 0.4]))
    axis = plot.view_widget.getPlotItem().getAxis("bottom")
    ticks = _tick_values(axis, _x_range(plot), axis.width() or 300)
    assert ticks and all(float(v).is_integer() for v in ticks)
    assert {0, 1, 2, 3} <= set(ticks)
    assert axis.tickStrings(ticks, 1.0, 1.0)[:2] == ["0", "1"]
    # The value axis keeps its fractions.
    left = plot.view_widget.getPlotItem().getAxis("left")
    assert any(not float(v).is_integer() for v in _tick_values(left, _y_range(plot)))


def test_output_index_axis_has_whole_number_ticks(qtbot):
    from hookscope.widgets.output_comparison import OutputComparison

    w = OutputComparison()
    qtbot.addWidget(w)
    w.resize(300, 450)
    w.show()
    lm = load_model("demo:clamp")
    w.show_result(compare(lm.module, lm.example_input, Plan(clamp={"0": (-0.5, 0.5)})))
    qtbot.waitExposed(w)
    axis = w.plot.getAxis("bottom")
    ticks = _tick_values(axis, w.plot.getViewBox().viewRange()[0], 200)
    assert ticks and all(float(v).is_integer() for v in ticks)
    assert w.diff_plot.getAxis("bottom").integer


def _hist_top(p: LayerPlot) -> float:
    return p.hist_widget.getPlotItem().getViewBox().viewRange()[1][1]


def test_exercise_1_clamp_spike_is_in_view_with_the_bound_line_drawn_over_it(qtbot):
    from hookscope.widgets.activation_panel import ActivationPanel

    panel = ActivationPanel()
    qtbot.addWidget(panel)
    panel.resize(700, 600)
    lm = load_model("demo:clamp")
    panel.show_result(compare(lm.module, lm.example_input,
                              Plan(capture=("0",), clamp={"0": (-0.5, 0.5)})))
    p = panel.panels()[("0", 0)]
    x, counts = p.hist_post.getData()
    spike = int(np.argmax(counts))
    assert counts[spike] == 4                       # every value piled up at 0.5
    assert abs(x[spike] - 0.5) < 0.05
    assert _hist_top(p) >= 4                        # ... and the whole spike is drawn
    assert not p.spike_note.isVisible()
    assert p.hi_line.zValue() > p.hist_post.zValue()  # the spike does not hide the line


def test_a_spike_taller_than_the_cap_is_cut_and_labelled(plot):
    torch.manual_seed(0)
    pre = torch.randn(1, 20000)
    post = pre.clamp(-0.05, 0.05)
    _clamped(plot, (-0.05, 0.05)).update_record(_record(post, pre, (-0.05, 0.05)))
    pre_peak = plot.hist_pre.getData()[1].max()
    post_peak = plot.hist_post.getData()[1].max()
    assert post_peak > 8 * pre_peak
    assert _hist_top(plot) == pytest.approx(8 * pre_peak)
    assert plot.spike_note.isVisible()
    assert plot.spike_note.textItem.toPlainText() == f"↑ {post_peak:,.0f} at bound"
    # A gentler clamp fits: no note.
    post = pre.clamp(-2.5, 2.5)
    _clamped(plot, (-2.5, 2.5)).update_record(_record(post, pre, (-2.5, 2.5)))
    assert not plot.spike_note.isVisible()
    assert _hist_top(plot) >= plot.hist_post.getData()[1].max()



def test_close_bounds_label_outwards(plot):
    pre = [-2.4, -1.5, 0.2, 1.2, 3.1, 0.6, 0.8, 0.5]
    post = [max(-0.2, min(0.2, v)) for v in pre]
    _clamped(plot, (-0.2, 0.2)).update_record(_record(post, pre, (-0.2, 0.2)))
    plot.grab()  # a paint applies the view's auto range
    lo_label = plot.lo_line.label.sceneBoundingRect()
    hi_label = plot.hi_line.label.sceneBoundingRect()
    lo_x = plot.lo_line.mapToScene(plot.lo_line.boundingRect().center()).x()
    hi_x = plot.hi_line.mapToScene(plot.hi_line.boundingRect().center()).x()
    assert lo_x < hi_x
    assert lo_label.right() <= lo_x          # "low -0.2" left of the low line
    assert hi_label.left() >= hi_x           # "high 0.2" right of the high line
    assert not lo_label.intersects(hi_label)


def test_open_bound_labels_sit_inside_the_plot_above_the_bars(plot):
    plot.update_record(_record([-0.31, -0.22, 0.1, 0.5, -0.4, 0.3]))
    plot.grab()
    vb = plot.hist_widget.getPlotItem().getViewBox()
    view = vb.sceneBoundingRect()
    labels = [plot.lo_line.label.sceneBoundingRect(), plot.hi_line.label.sceneBoundingRect()]
    for r in labels:
        assert view.contains(r)
    assert not labels[0].intersects(labels[1])
    # The tallest bar ends below both labels.
    peak = plot.hist_post.getData()[1].max()
    top_of_bars = vb.mapViewToScene(QPointF(0.0, peak)).y()
    assert all(r.bottom() <= top_of_bars + 1 for r in labels)


def test_clamped_token_map_labels_its_before_and_after_halves(qtbot):
    from hookscope.widgets.activation_panel import ActivationPanel

    panel = ActivationPanel()
    qtbot.addWidget(panel)
    panel.resize(620, 500)
    lm = load_model("demo:transformer")
    path = "encoder.layers.0.self_attn"
    panel.show_result(compare(lm.module, lm.example_input,
                              Plan(capture=(path,), clamp={path: (-0.1, 0.1)})))
    p = panel.panels()[(path, 0)]
    vp = p.view_widget.getPlotItem()
    bottom, top = vp.getAxis("bottom"), vp.getAxis("top")
    n, offset = bottom.halves()
    assert n == 32 and 32 < offset < 40           # 32 features, then a gap, then 32 again
    x_range = vp.getViewBox().viewRange()[0]
    ticks = _tick_values(bottom, x_range, 250)
    labels = bottom.tickStrings(ticks, 1.0, ticks[1] - ticks[0])
    assert labels.count("0") == 2                  # the after half counts from 0 again
    assert max(ticks) < offset + 32 and max(int(t) for t in labels) < 32
    # No before-half label crowds the after half's 0 (they read "300" when 30 touched it).
    assert all(t < offset - 5 or t >= offset for t in ticks)
    # Index 0 at the axis' left end keeps its label (pyqtgraph hides labels that overhang).
    assert bottom.style["hideOverlappingLabels"] is not True
    # "before" and "after" over the middle of each half, a line between them.
    names = {text: x for x, text in top._tickLevels[0]}
    assert names["before"] == pytest.approx(16) and names["after"] == pytest.approx(offset + 16)
    assert top.isVisible() and top.style["showValues"]
    assert p.separator.isVisible() and 32 < p.separator.value() < offset
    # An unclamped map is one picture again.
    panel.show_result(compare(lm.module, lm.example_input, Plan(capture=(path,))))
    assert bottom.halves() is None and not p.separator.isVisible() and not top.isVisible()


def test_images_have_a_symmetric_colour_bar_and_bars_do_not(plot):
    torch.manual_seed(1)
    t = torch.randn(1, 12, 32)
    plot.update_record(_record(t))
    bar = plot.colour_bar
    level = float(t.abs().max())
    assert bar.isVisible() and bar.levels() == pytest.approx((-level, level))
    assert plot.view_widget.getPlotItem().layout.itemAt(2, 5) is bar
    assert plot.image.levels == pytest.approx([-level, level])
    # Bars have no colour scale, and give its room back.
    plot.update_record(_record([0.2, -0.1, 0.4]))
    assert not bar.isVisible()
    grid = plot.view_widget.getPlotItem().layout
    assert bar not in [grid.itemAt(i) for i in range(grid.count())]
    plot.update_record(_record(2 * t))
    assert bar.isVisible() and bar.levels() == pytest.approx((-2 * level, 2 * level))


def test_histogram_counts_have_whole_number_ticks(plot):
    plot.update_record(_record([-5.0, -4.2, -1.9, 0.3, 3.2, 3.1]))
    plot.grab()
    axis = plot.hist_widget.getPlotItem().getAxis("left")
    y_range = plot.hist_widget.getPlotItem().getViewBox().viewRange()[1]
    ticks = _tick_values(axis, y_range, 150)
    assert ticks and all(float(v).is_integer() for v in ticks)


def test_a_narrow_bar_view_is_not_cut_off_at_the_right(qtbot):
    p = LayerPlot("0")
    qtbot.addWidget(p)
    p.resize(190, 480)                     # narrower than any column of the window
    p.show()
    qtbot.waitExposed(p)
    pre = [1.42, 0.71, 2.2, 0.82]
    _clamped(p, (-0.5, 0.5)).update_record(_record([0.5] * 4, pre, (-0.5, 0.5)))
    p.grab()
    vp = p.view_widget.getPlotItem()
    # The plot is no wider than its widget, and the title wrapped to fit.
    assert vp.geometry().width() <= p.view_widget.viewport().width() + 0.5
    title = p.view_widget.getPlotItem().titleLabel.item.boundingRect().width()
    assert title <= p.view_widget.width()          # on one line or wrapped, it fits
    # Bar 3's right edge is inside the visible part of the view.
    right_edge = vp.getViewBox().mapViewToScene(QPointF(3.4, 0)).x()
    assert right_edge < p.view_widget.viewport().width()
    # The low bound (-0.5), left of the values, is in view too, and the labels do not meet.
    assert p.lo_line.label.isVisible() and p.hi_line.label.isVisible()
    view = p.hist_widget.getPlotItem().getViewBox().sceneBoundingRect()
    lo_r, hi_r = p.lo_line.label.sceneBoundingRect(), p.hi_line.label.sceneBoundingRect()
    assert view.contains(lo_r) and view.contains(hi_r) and not lo_r.intersects(hi_r)
    # Wide again: one line.
    p.resize(900, 320)
    p.grab()
    assert p._title_form == "light: before · dark: after"


def test_a_redraw_with_the_same_labels_keeps_the_axes_drawn(plot, qtbot):
    # pyqtgraph rebuilds an axis' picture after every setTicks/setLabel, equal or
    # not; a Live drag redraws the same labels many times a second (1-2 ms an axis).
    from hookscope.widgets.plot_style import set_label, set_ticks

    torch.manual_seed(3)
    rec = _record(torch.randn(200))
    hp = plot.hist_widget.getPlotItem()
    axes = [hp.getAxis("left"), hp.getAxis("bottom"), plot.view_widget.getPlotItem().getAxis("left")]
    plot.update_record(rec)
    qtbot.waitUntil(lambda: all(a.picture is not None for a in axes))   # painted once
    plot.update_record(rec)
    assert all(a.picture is not None for a in axes)
    # A label or ticks that do change are shown (and the axis drawn again).
    bottom = axes[1]
    set_label(hp, "bottom", "another label")
    assert bottom.labelText == "another label" and bottom.picture is None
    qtbot.waitUntil(lambda: bottom.picture is not None)
    set_ticks(bottom, [[(0.0, "zero")]])
    assert bottom._tickLevels == [[(0.0, "zero")]] and bottom.picture is None
    set_label(hp, "bottom", None)
    assert not bottom.label.isVisible()
