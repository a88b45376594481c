"""Wide and heavy-tailed activations in a layer panel, driven with real keys,
clicks, hovers and Ctrl+wheel: the chosen view's numbers against torch, a zoom
re-pooled at full resolution, the automatic log scale on a heavy-tailed tensor."""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch
from support.mouse_events import hover, pick_view, view_to_viewport, wheel
from PySide6.QtCore import Qt

from hookscope.core import CaptureRecord, Plan, compare, load_model
from hookscope.core.engine.stats import summarize
from hookscope.core.views.wide_views import signed_exp, signed_log, value_decades
from hookscope.widgets.activation_panel import ActivationPanel
from hookscope.widgets.layer_plot import LayerPlot

TOKENS = [f"tok{i}" for i in range(12)]



def _clamped(plot, bounds):
    """``plot`` with its layer clamped to ``bounds`` in its session's plan (the lines' source)."""
    from hookscope.core import Clamp

    plot.session.intervene(plot.path, Clamp(*bounds))
    return plot

def _record(t: torch.Tensor, pre: torch.Tensor | None = None) -> CaptureRecord:
    kw = {}
    if pre is not None:
        kw = dict(pre_tensor=pre, pre_stats=summarize(pre).resolve(), intervention="clamp(-1, 1)")
    return CaptureRecord("x", 0, stats=summarize(t).resolve(), tensor=t, **kw)


@pytest.fixture
def plot(qtbot):
    p = LayerPlot("x")
    qtbot.addWidget(p)
    p.resize(1100, 380)
    p.show()
    qtbot.waitExposed(p)
    return p


@pytest.fixture
def clamped():
    torch.manual_seed(11)
    before = torch.randn(1, 12, 600)
    before[0, :, 17] *= 25   # one outlier feature
    return before.clamp(-1, 1), before


def _vb(p: LayerPlot):
    return p.view_widget.getPlotItem().getViewBox()


def _read(p: LayerPlot, qtbot, x: float, y: float) -> str:
    p.view_tools.text = "-"   # so the readout signal fires even for the same text
    with qtbot.waitSignal(p.readout) as sig:
        hover(p.view_widget, view_to_viewport(p.view_widget, _vb(p), x, y))
    return sig.args[0]


def test_per_token_norms_are_torch_norms_with_the_token_strings(plot, qtbot, clamped):
    after, before = clamped
    plot.set_token_labels(TOKENS)
    _clamped(plot, (-1.0, 1.0)).update_record(_record(after, before))
    pick_view(plot, qtbot, "row_norm")
    assert np.allclose(plot.hbars_post.opts["width"], torch.linalg.norm(after[0], dim=1).numpy())
    assert np.allclose(plot.hbars_pre.opts["width"], torch.linalg.norm(before[0], dim=1).numpy())
    assert plot.hbars_pre.isVisible() and not plot.image.isVisible()
    ticks = plot.view_widget.getPlotItem().getAxis("left")._tickLevels[0]
    assert (3.0, "tok3") in ticks
    text = _read(plot, qtbot, 1.0, 3.0)
    n_after, n_before = (float(torch.linalg.norm(t[0, 3])) for t in (after, before))
    assert text == f"norm of token 3 ('tok3'): after {n_after:.4g} · before {n_before:.4g}"


def test_per_unit_norms_show_the_outlier_unit_before_and_after(plot, qtbot, clamped):
    after, before = clamped
    _clamped(plot, (-1.0, 1.0)).update_record(_record(after, before))
    pick_view(plot, qtbot, "unit_norm")
    norms_after = torch.linalg.norm(after[0], dim=0)
    norms_before = torch.linalg.norm(before[0], dim=0)
    _x, y = plot.norm_pre.getData()
    assert float(y.max()) == pytest.approx(float(norms_before[17]))   # the spike survives
    _x, y = plot.norm_post.getData()
    assert float(y.max()) == pytest.approx(float(norms_after.max()))
    assert _vb(plot).viewRange()[1][1] >= float(norms_before[17])
    text = _read(plot, qtbot, 17.0, 1.0)
    unit = int(re.match(r"norm of feature (\d+): ", text).group(1))
    assert abs(unit - 17) <= 2
    assert text == (f"norm of feature {unit}: after {float(norms_after[unit]):.4g} · "
                    f"before {float(norms_before[unit]):.4g}")


def test_top_k_units_are_torch_topk_and_named_on_the_axis(plot, qtbot, clamped):
    after, before = clamped
    plot.set_token_labels(TOKENS)
    _clamped(plot, (-1.0, 1.0)).update_record(_record(after, before))
    pick_view(plot, qtbot, "top_k")
    score = torch.maximum(after[0].abs().mean(0), before[0].abs().mean(0))
    expected = torch.topk(score, 32).indices.tolist()
    assert plot.wide.top_units.tolist() == expected and expected[0] == 17
    assert "top 32 of 600 units" in plot.title.text()
    labels = [s for _pos, s in plot.view_widget.getPlotItem().getAxis("bottom")._tickLevels[0]]
    assert labels[0] == "17" and set(labels) <= {str(u) for u in expected}
    _n, offset, _end, _sep = plot._layout_key[4]
    text = _read(plot, qtbot, offset + 0.5, 2.5)    # after half, first column, token 2
    assert text == f"after · token 2 'tok2', feature 17 (top-k #1): {float(after[0, 2, 17]):.4g}"
    text = _read(plot, qtbot, 1.5, 4.5)             # before half, second column
    u = expected[1]
    assert text == f"before · token 4 'tok4', feature {u} (top-k #2): {float(before[0, 4, u]):.4g}"


def test_a_zoomed_map_is_pooled_again_at_full_resolution(plot, qtbot):
    torch.manual_seed(12)
    t = torch.randn(1, 128, 3072)
    labels = [f"w{i}" for i in range(128)]
    plot.set_token_labels(labels)
    plot.update_record(_record(t))
    assert plot.shown_view == "map" and plot.wide.drawn.scale[1] > 2   # pooled: many features a pixel
    assert _read(plot, qtbot, 1500.0, 60.0).split(": ")[1].startswith("≈")
    vb = _vb(plot)
    centre = view_to_viewport(plot.view_widget, vb, 1500.0, 64.0)
    for _ in range(24):
        wheel(plot.view_widget.viewport(), centre, 1.0, ctrl=True)
    qtbot.waitUntil(lambda: plot.wide._window is not None and plot.wide.drawn.scale[1] <= 1.0)
    (x0, x1), (y0, y1) = vb.viewRange()
    text = _read(plot, qtbot, 0.5 * (x0 + x1), 0.5 * (y0 + y1))
    m = re.match(r"token (\d+) '(w\d+)', feature (\d+): (.+)$", text)
    assert m, text
    r, c = int(m.group(1)), int(m.group(3))
    assert m.group(2) == labels[r] and m.group(4) == f"{float(t[0, r, c]):.4g}"   # exact, no ≈
    # Reset view: the whole map, pooled, again.
    qtbot.mouseClick(plot.view_tools.reset_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: plot.wide._window is None and plot.wide.drawn.scale[1] > 2)


def test_zooming_into_the_after_half_reads_the_after_tensor(plot, qtbot, clamped):
    after, before = clamped
    _clamped(plot, (-1.0, 1.0)).update_record(_record(after, before))
    n, offset, _end, _sep = plot._layout_key[4]
    vb = _vb(plot)
    at = view_to_viewport(plot.view_widget, vb, offset + 100.0, 6.0)
    for _ in range(14):
        wheel(plot.view_widget.viewport(), at, 1.0, ctrl=True)
    qtbot.waitUntil(lambda: plot.wide._window is not None and plot.wide._window.side == "after")
    (x0, x1), (y0, y1) = vb.viewRange()
    text = _read(plot, qtbot, 0.5 * (x0 + x1), 0.5 * (y0 + y1))
    m = re.match(r"after · token (\d+), feature (\d+): (.+)$", text)
    assert m, text
    r, c = int(m.group(1)), int(m.group(2))
    assert plot.wide.drawn.scale[1] <= 1.0 and m.group(3) == f"{float(after[0, r, c]):.4g}"


def test_a_heavy_tailed_tensor_is_drawn_on_a_log_scale_by_default(plot, qtbot):
    torch.manual_seed(13)
    t = torch.exp(4 * torch.randn(1, 16, 256)) * torch.sign(torch.randn(1, 16, 256))
    decades = value_decades(t)
    assert decades > 4
    plot.update_record(_record(t))
    chooser = plot.chooser
    assert chooser.log_box.isChecked() and chooser.note.isVisible()
    assert chooser.note.text() == f"log scale: values span {decades:.0f} decades"
    hp = plot.hist_widget.getPlotItem()
    assert hp.getAxis("bottom").labelText == "value (signed log)"
    edges, drawn = plot.hist_post.getData()
    scale = plot.histogram.log_scale
    assert edges[-1] == pytest.approx(float(signed_log(t.max().numpy(), scale)), rel=1e-6)
    real_edges, counts = plot.histogram._series["after"]
    assert counts.sum() == t.numel() and np.allclose(drawn, np.log10(1 + counts))
    # The readout of the fullest bin names real values and real counts.
    i = int(np.argmax(counts))
    hvb = hp.getViewBox()
    mid = 0.5 * (edges[i] + edges[i + 1])
    plot.hist_tools.text = "-"
    with qtbot.waitSignal(plot.readout) as sig:
        hover(plot.hist_widget, view_to_viewport(plot.hist_widget, hvb, mid, 0.5 * drawn[i]))
    lo, hi = signed_exp(edges[i], scale), signed_exp(edges[i + 1], scale)
    assert sig.args[0] == f"[{lo:.4g}, {hi:.4g})  {counts[i]:,.0f} values"
    # The map's colours are signed-log, its readouts real values.
    knee = float(t.abs().median())
    assert plot.wide._log_scale_of_map == pytest.approx(knee, rel=1e-2)
    top = float(signed_log(np.array(plot.wide._level), plot.wide._log_scale_of_map))
    assert plot.image.levels == pytest.approx([-top, top]) and top < 12   # not 2.8e8-wide
    assert np.nanmax(np.abs(plot.image.image)) <= top + 1e-6
    text = _read(plot, qtbot, 100.5, 3.5)
    assert text == f"token 3, feature 100: {float(t[0, 3, 100]):.4g}"
    # One click turns it off; the choice sticks for this panel.
    with qtbot.waitSignal(plot.viewChosen) as sig:
        qtbot.mouseClick(chooser.log_box, Qt.MouseButton.LeftButton)
    assert sig.args[0] == {"view": None, "log": False}
    assert not chooser.log_box.isChecked() and not chooser.note.isVisible()
    assert hp.getAxis("bottom").labelText == "value"
    edges, _ = plot.hist_post.getData()
    assert edges[-1] == pytest.approx(float(t.max()), rel=1e-5)


def test_a_normal_tensor_stays_linear(plot):
    torch.manual_seed(14)
    plot.update_record(_record(torch.randn(1, 16, 256)))
    assert not plot.chooser.log_box.isChecked() and not plot.chooser.note.isVisible()
    assert plot.histogram.log_scale is None


def test_the_chosen_view_is_kept_for_the_layer(qtbot):
    panel = ActivationPanel()
    qtbot.addWidget(panel)
    panel.resize(1000, 700)
    panel.show()
    store: dict = {}
    panel.view_choices = store
    lm = load_model("demo:transformer")
    result = compare(lm.module, lm.example_input, Plan(capture=("embed",)))
    panel.show_result(result)
    p = panel.panels()[("embed", 0)]
    qtbot.waitExposed(p)
    with qtbot.waitSignal(panel.viewChosen):
        pick_view(p, qtbot, "row_norm")
    assert store == {"embed": {"view": "row_norm", "log": None}}
    panel.clear()
    panel.show_result(result)
    again = panel.panels()[("embed", 0)]
    assert again is not p and again.shown_view == "row_norm" and again.hbars_post.isVisible()


def test_norms_of_a_heavy_tailed_layer_go_on_the_log_scale_too(plot, qtbot):
    torch.manual_seed(15)
    before = torch.randn(1, 12, 300)
    before[0, 5] *= 1e6        # one token's vector is a million times larger
    after = before.clamp(-1, 1)
    plot.set_token_labels(TOKENS)
    _clamped(plot, (-1.0, 1.0)).update_record(_record(after, before))
    assert plot.chooser.log_on()
    pick_view(plot, qtbot, "row_norm")
    norms = torch.linalg.norm(before[0], dim=1).numpy()
    both = np.concatenate([torch.linalg.norm(after[0], dim=1).numpy(), norms])
    scale = float(both[both > 0].min()) / 2
    assert np.allclose(plot.hbars_pre.opts["width"], signed_log(norms, scale), rtol=1e-5)
    assert plot.view_widget.getPlotItem().getAxis("bottom").labelText.endswith("(log)")
    text = _read(plot, qtbot, 0.5, 5.0)
    assert text.endswith(f"before {float(norms[5]):.4g}")   # the readout keeps the real norm


def test_a_long_vector_is_folded_row_by_row_into_a_near_square_map():
    # A 1 × N output is drawn as a near-square map, row by row; the cells past
    # the last value are blank (NaN). A vector that fills the square is folded
    # without a padded copy.
    from hookscope.core.views import heat_map as _heat_map

    square = torch.arange(16.0).reshape(1, 16)
    m = _heat_map(square)
    assert m.shape == (4, 4) and torch.equal(m, torch.arange(16.0).reshape(4, 4))
    assert m.data_ptr() == square.data_ptr()
    m = _heat_map(torch.arange(10.0).reshape(1, 10))
    assert m.shape == (3, 4) and torch.equal(m.reshape(-1)[:10], torch.arange(10.0))
    assert torch.isnan(m.reshape(-1)[10:]).all()
