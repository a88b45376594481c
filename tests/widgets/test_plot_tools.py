"""Every plot's mouse tools with real events: the wheel scrolls the panel list,
Ctrl+wheel zooms with a visible reset, hovering reads the value out, and a
right-click exports PNG, SVG and CSV of the plotted data."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest
import torch
from support.mouse_events import hover, view_to_viewport, wheel
from PySide6.QtCore import QPoint, Qt
from PySide6.QtGui import QContextMenuEvent
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QApplication

from hookscope.core import CaptureRecord, HookscopeError, Plan, compare, load_model
from hookscope.core.engine.stats import HIST_SAMPLE, summarize
from hookscope.widgets.activation_panel import ActivationPanel
from hookscope.widgets.layer_plot import LayerPlot


@pytest.fixture
def cnn_panel(qtbot):
    panel = ActivationPanel()
    qtbot.addWidget(panel)
    panel.resize(900, 500)
    panel.show()
    lm = load_model("demo:cnn")
    result = compare(lm.module, lm.example_input,
                     Plan(capture=("conv1", "bn1", "relu1", "pool1", "fc"), clamp={"conv1": (-0.5, 0.5)}))
    panel.show_result(result)
    qtbot.waitExposed(panel)
    for p in panel.panels().values():
        p.grab()    # painted once: view ranges applied
    return panel, result


def _centre(widget) -> QPoint:
    return widget.viewport().rect().center()


def test_wheel_scrolls_the_panel_list_and_leaves_the_plot_alone(cnn_panel):
    panel, _ = cnn_panel
    bar = panel.scroll.verticalScrollBar()
    assert bar.maximum() > 0
    p = panel.panels()[("conv1", 0)]
    vb = p.view_widget.getPlotItem().getViewBox()
    before = vb.viewRange()
    for widget in (p.view_widget, p.hist_widget):
        start = bar.value()
        wheel(widget.viewport(), _centre(widget), notches=-1)
        assert bar.value() > start            # scrolled down the list
    assert vb.viewRange() == before          # the feature maps did not zoom
    assert not p.view_tools.reset_button.isVisible()


def test_ctrl_wheel_zooms_and_the_reset_button_undoes_it(cnn_panel, qtbot):
    panel, _ = cnn_panel
    p = panel.panels()[("conv1", 0)]
    bar = panel.scroll.verticalScrollBar()
    start = bar.value()
    vb = p.view_widget.getPlotItem().getViewBox()
    (x0, x1), (y0, y1) = vb.viewRange()
    wheel(p.view_widget.viewport(), _centre(p.view_widget), notches=2, ctrl=True)
    (a0, a1), (b0, b1) = vb.viewRange()
    assert a1 - a0 < 0.8 * (x1 - x0) and b1 - b0 < 0.8 * (y1 - y0)   # zoomed in
    assert bar.value() == start                                      # no scrolling
    button = p.view_tools.reset_button
    assert button.isVisible() and button.text() == "Reset view"
    QTest.mouseClick(button, Qt.MouseButton.LeftButton)
    assert not button.isVisible()
    (c0, c1), _ = vb.viewRange()
    assert c1 - c0 == pytest.approx(x1 - x0, rel=0.05)
    # The histogram zooms along its values only, and resets to its fitted range.
    hvb = p.hist_widget.getPlotItem().getViewBox()
    (h0, h1), hy = hvb.viewRange()
    wheel(p.hist_widget.viewport(), _centre(p.hist_widget), notches=1, ctrl=True)
    (g0, g1), gy = hvb.viewRange()
    assert g1 - g0 < h1 - h0 and gy == pytest.approx(hy)
    QTest.mouseClick(p.hist_tools.reset_button, Qt.MouseButton.LeftButton)
    assert hvb.viewRange()[0] == pytest.approx([h0, h1])


def test_hover_reads_a_histogram_bin_and_a_feature_map_cell(cnn_panel, qtbot):
    panel, result = cnn_panel
    p = panel.panels()[("conv1", 0)]
    rec = result.captures["conv1"][0]
    edges, counts = p.hist_post.getData()
    i = int(np.argmax(counts))
    hvb = p.hist_widget.getPlotItem().getViewBox()
    mid = 0.5 * (edges[i] + edges[i + 1])
    with qtbot.waitSignal(panel.readout) as sig:
        hover(p.hist_widget, view_to_viewport(p.hist_widget, hvb, mid, 0.5 * counts[i]))
    text = sig.args[0]
    assert text.startswith("conv1 (call 0) · ")
    assert f"after: {counts[i]:,.0f}" in text and f"[{edges[i]:.4g}, {edges[i + 1]:.4g})" in text
    # A cell of the "after" half: channel 0's top-left value is the clamped tensor's.
    d = p.wide.drawn
    vb = p.view_widget.getPlotItem().getViewBox()
    x = d.half + d.gap + 0.5
    with qtbot.waitSignal(p.readout) as sig:
        hover(p.view_widget, view_to_viewport(p.view_widget, vb, x, 0.5))
    value = float(rec.tensor[0, 0, 0, 0])
    assert sig.args[0] == f"after · channel 0, y 0, x 0: {value:.4g}"
    # Leaving the plot clears the readout.
    with qtbot.waitSignal(p.readout) as sig:
        QApplication.sendEvent(p.view_widget.viewport(), _leave())
    assert sig.args[0] == ""


def _leave():
    from PySide6.QtCore import QEvent

    return QEvent(QEvent.Type.Leave)


def test_hover_reads_a_bar_and_a_heat_map_cell(qtbot):
    p = LayerPlot("x")
    qtbot.addWidget(p)
    p.resize(800, 320)
    p.show()
    qtbot.waitExposed(p)
    t = torch.arange(24, dtype=torch.float32).reshape(4, 6) / 10
    p.update_record(CaptureRecord("x", 0, stats=summarize(t).resolve(), tensor=t))
    p.grab()
    vb = p.view_widget.getPlotItem().getViewBox()
    with qtbot.waitSignal(p.readout) as sig:
        hover(p.view_widget, view_to_viewport(p.view_widget, vb, 4.5, 2.5))
    assert sig.args[0] == f"row 2, unit 4: {float(t[2, 4]):.4g}"
    v = torch.tensor([[0.25, -1.5, 3.0]])
    p.update_record(CaptureRecord("x", 0, stats=summarize(v).resolve(), tensor=v))
    p.grab()
    with qtbot.waitSignal(p.readout) as sig:
        hover(p.view_widget, view_to_viewport(p.view_widget, vb, 1.0, -0.5))
    assert sig.args[0] == "unit 1: -1.5"


def test_right_click_offers_export_and_each_format_writes_the_data(cnn_panel, tmp_path, qtbot):
    panel, result = cnn_panel
    p = panel.panels()[("conv1", 0)]
    vp = p.hist_widget.viewport()
    pos = _centre(p.hist_widget)
    QApplication.sendEvent(vp, QContextMenuEvent(QContextMenuEvent.Reason.Mouse, pos,
                                                 vp.mapToGlobal(pos)))
    menu = p.hist_tools.menu
    qtbot.waitUntil(menu.isVisible)
    assert [a.text() for a in menu.actions() if a.text()] == [
        "Export as PNG…", "Export as SVG…", "Export data as CSV…", "Reset view"]
    menu.close()
    png = p.hist_tools.export(tmp_path / "h.png")
    svg = p.view_tools.export(tmp_path / "v.svg")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert b"<svg" in svg.read_bytes()[:2000]
    # The histogram's CSV holds the drawn counts, summing to the layer's size.
    rows = list(csv.reader(Path(p.hist_tools.export(tmp_path / "h.csv")).read_text().splitlines()))
    assert rows[0] == ["series", "bin_low", "bin_high", "count"]
    rec = result.captures["conv1"][0]
    after = [r for r in rows[1:] if r[0] == "after"]
    assert sum(float(r[3]) for r in after) == rec.tensor.numel()
    # The feature maps' CSV: one row per value of the first sample, after and before.
    rows = list(csv.reader(Path(p.view_tools.export(tmp_path / "v.csv")).read_text().splitlines()))
    assert rows[0] == ["channel", "y", "x", "value", "before"]
    assert len(rows) - 1 == rec.tensor[0].numel()
    c, y, x, v, b = rows[1 + 37]
    assert float(v) == pytest.approx(float(rec.tensor[0, int(c), int(y), int(x)]))
    assert float(b) == pytest.approx(float(rec.pre_tensor[0, int(c), int(y), int(x)]))
    with pytest.raises(HookscopeError):
        p.view_tools.export(tmp_path / "v.gif")


def test_the_whole_panel_exports_as_one_figure(cnn_panel, tmp_path):
    panel, _ = cnn_panel
    png = panel.export_figure(tmp_path / "fig.png")
    from PySide6.QtGui import QImage

    img = QImage(str(png))
    assert img.height() >= sum(p.height() for p in panel.panels().values())
    svg = panel.export_figure(tmp_path / "fig.svg").read_text()
    assert "<svg" in svg and svg.count("<path") > 10


def test_a_sampled_histogram_is_scaled_to_the_full_count_and_says_so(qtbot):
    p = LayerPlot("big")
    qtbot.addWidget(p)
    p.resize(800, 320)
    p.show()
    torch.manual_seed(0)
    t = torch.randn(1, 4 * HIST_SAMPLE)
    stats = summarize(t).resolve()
    assert stats.hist_is_sample
    p.update_record(CaptureRecord("big", 0, stats=stats, tensor=t))
    _, counts = p.hist_post.getData()
    assert counts.sum() == pytest.approx(t.numel(), rel=1e-6)
    # the bins' shape is the sample's, scaled
    np.testing.assert_allclose(counts, stats.hist_counts * (t.numel() / stats.hist_counts.sum()))
    title = p.hist_widget.getPlotItem().titleLabel.text
    assert p.hist_widget.getPlotItem().titleLabel.isVisible()
    assert "scaled up from a sample of" in title and f"{int(stats.hist_counts.sum()):,}" in title
    small = torch.randn(1, 100)
    p.update_record(CaptureRecord("big", 0, stats=summarize(small).resolve(), tensor=small))
    assert not p.hist_widget.getPlotItem().titleLabel.isVisible()


def test_the_hover_box_stays_whole_at_every_edge_and_goes_after_a_drag(cnn_panel, qtbot):
    # Near each corner of the histogram the readout box is fully inside the plot
    # widget; a drag of a bound line ends with no stale readout left up.
    from support.mouse_events import drag_line

    panel, _ = cnn_panel
    p = panel.panels()[("conv1", 0)]
    w = p.hist_widget
    hvb = w.getPlotItem().getViewBox()
    edges, _ = p.hist_post.getData()
    _, (y0, y1) = hvb.viewRange()
    first, last = 0.5 * (edges[0] + edges[1]), 0.5 * (edges[-2] + edges[-1])   # the outer bins
    label = p.hist_tools.label
    for x, fy in ((first, 0.02), (last, 0.02), (first, 0.98), (last, 0.98)):
        hover(w, view_to_viewport(w, hvb, x, y0 + fy * (y1 - y0)))
        qtbot.waitUntil(lambda: label.isVisible())
        box = label.geometry()
        assert w.rect().contains(box), (x, fy, box, w.rect())
    drag_line(w, p.lo_line, -0.2)
    assert not label.isVisible() and p.hist_tools.text == ""
