"""Activation panels on real runs of the demos: views by shape, in-place updates,
dragging clamp bounds."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from support.mouse_events import drag_line

from hookscope.core import Plan, compare, load_model
from hookscope.widgets.activation_panel import ActivationPanel
from hookscope.core.views import MAX_PIXELS, feature_grid, view_image, view_kind


def _run(spec: str, capture, clamp=None, keep_tensors=True):
    lm = load_model(spec)
    return compare(lm.module, lm.example_input,
                   Plan(capture=capture, clamp=clamp or {}, keep_tensors=keep_tensors))


@pytest.fixture
def panel(qtbot):
    p = ActivationPanel()
    qtbot.addWidget(p)
    p.resize(900, 700)
    return p


@pytest.mark.parametrize("spec,capture,kinds", [
    ("demo:cnn", ["conv1", "pool2", "flatten", "fc"],
     {"conv1": "feature_maps", "pool2": "feature_maps", "flatten": "bars", "fc": "bars"}),
    ("demo:transformer", ["embed", "encoder.layers.0.linear1", "encoder.layers.0.self_attn", "head"],
     {"embed": "tokens", "encoder.layers.0.linear1": "tokens",
      "encoder.layers.0.self_attn": "tokens", "head": "tokens"}),
    ("demo:features", ["fc1", "fc2", "fc3"], {"fc1": "bars", "fc2": "bars", "fc3": "bars"}),
    ("demo:clamp", ["0", "1"], {"0": "bars", "1": "bars"}),
])
def test_panels_have_the_right_view(panel, spec, capture, kinds):
    assert panel.objectName() == "activationPanel"
    panel.show_result(_run(spec, capture))
    got = {path: p.view_kind for (path, _call), p in panel.panels().items()}
    assert got == kinds
    assert list(got) == capture  # model order
    assert not panel.empty_label.isVisibleTo(panel)


def test_stats_only_run_gives_none_view(panel):
    panel.show_result(_run("demo:cnn", ["conv1"], keep_tensors=False))
    (p,) = panel.panels().values()
    assert p.view_kind == "none"
    assert "min" in p.stats_label.text()


def _shown(panel, result):
    """Show ``result`` as the window does: the session holds the plan it ran with."""
    panel.session.set_plan(result.plan)
    panel.show_result(result)


def test_update_reuses_plot_items_and_drops_gone_layers(panel):
    _shown(panel, _run("demo:cnn", ["conv1", "fc"], {"conv1": (-0.5, 0.5)}))
    first = panel.panels()
    items = {k: dict(p.plot_items()) for k, p in first.items()}
    _shown(panel, _run("demo:cnn", ["conv1", "fc"], {"conv1": (-0.2, 0.3)}))
    second = panel.panels()
    for key, p in second.items():
        assert p is first[key]
        assert all(p.plot_items()[name] is item for name, item in items[key].items())
    conv1 = second[("conv1", 0)]
    assert conv1.bounds() == (-0.2, 0.3)
    assert conv1.lo_line.value() == pytest.approx(-0.2)
    assert conv1.hi_line.value() == pytest.approx(0.3)
    assert "clamp changed" in conv1.stats_label.text()
    _shown(panel, _run("demo:cnn", ["fc"]))
    assert list(panel.panels()) == [("fc", 0)]


def test_clamped_feature_maps_show_before_and_after(panel):
    _shown(panel, _run("demo:cnn", ["conv1"], {"conv1": (-0.5, 0.5)}))
    p = panel.panels()[("conv1", 0)]
    img = p.image.image
    alone = feature_grid(torch.zeros(8, 8, 8))
    # Before and after side by side: more than twice as wide as one grid.
    assert img.shape[0] > 2 * alone.shape[1]
    assert p.hist_pre.isVisible() and p.hist_post.isVisible()


def test_dragging_a_bound_line_edits_the_session_in_one_undo_step(panel, qtbot):
    panel.show()
    _shown(panel, _run("demo:cnn", ["conv1"], {"conv1": (-0.5, 0.5)}))
    p = panel.panels()[("conv1", 0)]
    qtbot.waitExposed(p)
    s = panel.session
    plans = []
    s.subscribe(lambda ev: plans.append(s.plan) if ev.kind == "plan" else None)
    drag_line(p.hist_widget, p.hi_line, 0.25)
    lo, hi = s.plan.clamp["conv1"]
    assert lo == -0.5 and hi == pytest.approx(0.25, abs=0.05)
    assert len(plans) >= 3                         # every step of the drag reached the session
    assert all(pl.clamp["conv1"][0] == -0.5 for pl in plans)
    assert p.bounds() == (lo, hi) and p.hi_line.value() == pytest.approx(hi)
    # Low cannot pass high.
    drag_line(p.hist_widget, p.lo_line, 3.0)
    lo2, hi2 = s.plan.clamp["conv1"]
    assert lo2 <= hi2 == hi
    # Each drag is one undo step, and the lines follow the undo.
    assert s.undo() and s.plan.clamp["conv1"] == (-0.5, hi)
    assert p.lo_line.value() == pytest.approx(-0.5)
    assert s.undo() and s.plan.clamp["conv1"] == (-0.5, 0.5)
    assert (p.lo_line.value(), p.hi_line.value()) == pytest.approx((-0.5, 0.5))


def test_dragging_an_unclamped_layer_keeps_the_other_end_open(panel, qtbot):
    panel.show()
    _shown(panel, _run("demo:features", ["fc1"]))
    p = panel.panels()[("fc1", 0)]
    qtbot.waitExposed(p)
    drag_line(p.hist_widget, p.lo_line, -0.1)
    lo, hi = panel.session.plan.clamp["fc1"]
    assert lo == pytest.approx(-0.1, abs=0.1) and hi == math.inf


def test_lines_follow_the_plan_of_the_session(panel, qtbot):
    from hookscope.core import Clamp

    _shown(panel, _run("demo:cnn", ["conv1"], {"conv1": (-0.5, 0.5)}))
    p = panel.panels()[("conv1", 0)]
    panel.session.intervene("conv1", Clamp(-0.1, 0.9))
    assert p.bounds() == (-0.1, 0.9)
    assert (p.lo_line.value(), p.hi_line.value()) == pytest.approx((-0.1, 0.9))
    panel.session.clear_intervention("conv1")
    assert p.bounds() is None
    assert p.lo_line.label.format == "low: none"


def test_select_highlights_the_layer(panel):
    _shown(panel, _run("demo:cnn", ["conv1", "fc"]))
    assert panel.select("fc")
    assert panel.panels()[("fc", 0)].highlighted
    assert not panel.panels()[("conv1", 0)].highlighted
    assert not panel.select("bn1")


@pytest.mark.parametrize("shape,kind", [((1, 10), "bars"), ((10,), "bars"), ((1, 300), "heatmap"),
                                        ((4, 10), "heatmap"), ((2, 3, 8, 8), "feature_maps"),
                                        ((1, 12, 32), "tokens"), ((1, 2, 3, 4, 5), "heatmap"),
                                        ((), "bars")])
def test_view_kind_by_shape(shape, kind):
    assert view_kind(shape) == kind
    assert view_kind(shape, has_tensor=False) == "none"


def test_large_maps_are_reduced():
    img = view_image(torch.randn(1, 128, 300, 300), "feature_maps")
    assert max(img.shape) <= MAX_PIXELS
    img = view_image(torch.randn(1, 2000, 1000), "tokens")
    assert img.shape == (MAX_PIXELS, MAX_PIXELS)
    img = view_image(torch.randn(1, 100_000), "heatmap")
    assert max(img.shape) <= MAX_PIXELS and np.isfinite(img).any()


def test_a_captured_layer_that_never_ran_gets_a_note(panel):
    out_proj = "encoder.layers.0.self_attn.out_proj"   # MultiheadAttention uses its weights directly
    panel.show()
    panel.show_result(_run("demo:transformer", ["embed", out_proj]))
    assert list(panel.panels()) == [("embed", 0)]
    note = panel.notes()[out_proj]
    assert note.objectName() == f"layerNotRun:{out_proj}"
    assert "did not run in this forward (0 calls)" in note.text() and out_proj in note.text()
    assert note.isVisibleTo(panel) and not panel.empty_label.isVisibleTo(panel)
    assert panel.select(out_proj)
    # Only the note: still no "No activations yet" text.
    panel.show_result(_run("demo:transformer", [out_proj]))
    assert not panel.panels() and panel.notes()[out_proj] is note
    assert not panel.empty_label.isVisibleTo(panel)
    # Gone from the capture: the note goes too.
    panel.show_result(_run("demo:transformer", ["embed"]))
    assert panel.notes() == {}
    panel.clear()
    assert panel.empty_label.isVisibleTo(panel)
