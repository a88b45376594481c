"""A panel's shape view prepared with a result (``prepare_display`` with ``shapes``) holds
the very arrays the panel drew when it made them itself: the heat map, token map,
top-k map and position norms pooled to the plot's pixels, the feature-map grid, the
row and unit norms, the bars. The reference below is the panel's former arithmetic,
written out with core's building blocks, on the demos' own activations."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from hookscope.core import Session
from hookscope.core.engine import reference_of
from hookscope.core.views import (ShapeViews, ShapeWanted, bars_values, effective_view, heat_map,
                                  image_pixels, picture, prepare_display, reduce_2d, row_norms,
                                  side_by_side, symmetric_level, top_k_picture, top_units,
                                  unit_norms, view_image, view_kind)

HEIGHT, WIDTH = 300, 700   # a plot's size in device pixels


def _pixels(halves: bool) -> tuple[int, int]:
    """The panel's former pixel budget: at least 128 a side, halves share the width."""
    rows, cols = max(128, HEIGHT), max(128, WIDTH)
    return rows, (max(128, cols // 2) if halves else cols)


def _old_pooled(post_m, pre_m):
    rows, cols = _pixels(pre_m is not None)
    post = reduce_2d(post_m, rows, cols)
    pre = reduce_2d(pre_m, rows, cols) if pre_m is not None else None
    gap = 0 if pre is None else max(2, pre.shape[1] // 16)
    return (post if pre is None else side_by_side(pre, post, gap=gap)), symmetric_level(post, pre)


def _old_map(t, pre, kind, view):
    """The full-resolution maps a panel made for ``view``, and its top units."""
    if view == "top_k":
        units = top_units(t, kind, also=pre)
        return top_k_picture(t, kind, units), (top_k_picture(pre, kind, units)
                                               if pre is not None else None), units
    if view == "row_norm":
        h, w = t.shape[2], t.shape[3]
        return (torch.from_numpy(row_norms(t, kind)).reshape(h, w),
                torch.from_numpy(row_norms(pre, kind)).reshape(h, w) if pre is not None else None,
                None)
    if kind == "tokens":
        return picture(t, kind), picture(pre, kind) if pre is not None else None, None
    return heat_map(t), heat_map(pre) if pre is not None else None, None


def _check(rec, shape):
    """``shape`` (a record's prepared view) against the panel's former arithmetic."""
    t, pre = rec.tensor, reference_of(rec)[0]
    kind = view_kind(rec.shape)
    assert shape.kind == kind
    view = shape.view
    if kind == "bars":
        np.testing.assert_array_equal(shape.bars[0], bars_values(t))
        np.testing.assert_array_equal(shape.bars[1], bars_values(pre))
        return "bars"
    if view == "unit_norm":
        np.testing.assert_array_equal(shape.norms[0], unit_norms(t, kind))
        np.testing.assert_array_equal(shape.norms[1], unit_norms(pre, kind))
        return "unit_norm"
    if view == "row_norm" and kind != "feature_maps":
        np.testing.assert_array_equal(shape.norms[0], row_norms(t, kind))
        np.testing.assert_array_equal(shape.norms[1], row_norms(pre, kind))
        return "row_norm"
    if kind == "feature_maps" and view == "map":
        rows, cols = _pixels(True)
        post_i, pre_i = view_image(t, kind, rows, cols), view_image(pre, kind, rows, cols)
        gap = max(2, pre_i.shape[1] // 16)
        np.testing.assert_array_equal(shape.picture.image, side_by_side(pre_i, post_i, gap=gap))
        assert shape.picture.level == symmetric_level(post_i, pre_i)
        return "grid"
    post_m, pre_m, units = _old_map(t, pre, kind, view)
    torch.testing.assert_close(shape.maps[0], post_m, rtol=0, atol=0, equal_nan=True)
    torch.testing.assert_close(shape.maps[1], pre_m, rtol=0, atol=0, equal_nan=True)
    if units is not None:
        np.testing.assert_array_equal(shape.units, units)
    img, level = _old_pooled(post_m, pre_m)
    np.testing.assert_array_equal(shape.picture.image, img)
    assert shape.picture.level == level
    np.testing.assert_array_equal(shape.picture.coloured, np.clip(img, -level, level))
    return {"top_k": "top_k", "row_norm": "position_norm"}.get(view, kind)


def _prepared(spec, captures, intervene, views, input_text=None):
    s = Session.load(spec, input_text=input_text)
    try:
        s.capture(*captures)
        s.intervene(*intervene)
        r = s.run()
        shapes = ShapeViews(by_path={p: ShapeWanted(v, False, HEIGHT, WIDTH)
                                     for p, v in views.items()})
        shown = prepare_display(r, reference_of, shapes=shapes)
        return [(rec, shown.for_record(rec).shape) for p in captures for rec in r.captures[p]]
    finally:
        s.close()


@pytest.fixture(scope="module")
def clamp():
    from hookscope.core import Clamp
    return Clamp


def test_a_cnn_s_grid_position_norms_unit_norms_and_bars_are_the_panel_s(clamp):
    got = _prepared("demo:cnn", ["conv1", "relu1", "pool2", "fc"], ("conv1", clamp(-0.5, 0.5)),
                    {"conv1": "map", "relu1": "row_norm", "pool2": "unit_norm", "fc": "map"})
    # relu1 and fc compare with the run without the clamp (their reference).
    assert [_check(rec, shape) for rec, shape in got] == ["grid", "position_norm", "unit_norm",
                                                           "bars"]


def test_a_batch_s_heat_map_and_its_top_k_are_the_panel_s(clamp):
    got = _prepared("demo:cnn", ["flatten", "fc"], ("flatten", clamp(-0.2, 0.2)),
                    {"flatten": "map", "fc": "top_k"}, input_text="random:4x1x8x8:seed=0")
    assert [_check(rec, shape) for rec, shape in got] == ["heatmap", "top_k"]


@pytest.mark.parametrize("spec,layer", [("demo:lm", "blocks.0.mlp.0"), ("demo:transformer",
                                                                         "encoder.layers.0.linear1")])
def test_a_language_model_s_token_map_top_k_and_norms_are_the_panel_s(clamp, spec, layer):
    for view, drawn in (("map", "tokens"), ("top_k", "top_k"), ("row_norm", "row_norm"),
                        ("unit_norm", "unit_norm")):
        (rec, shape), = _prepared(spec, [layer], (layer, clamp(-0.5, 0.5)), {layer: view})
        assert _check(rec, shape) == drawn


def test_what_a_panel_shows_decides_what_is_made():
    torch.manual_seed(0)
    t = torch.randn(1, 6, 40)
    assert effective_view("top_k", tuple(t.shape), "tokens") == "top_k"
    assert effective_view("top_k", (1, 10), "bars") == "map"       # not offered: the map
    assert effective_view(None, tuple(t.shape), "tokens") == "map"
    assert image_pixels(10, 10, False) == (128, 128)               # a plot not laid out yet
    assert image_pixels(400, 900, True) == (400, 450)
    # A picture fits a plot of about its size, on its scale; bars and norms fit any size.
    from hookscope.core.views import shape_display
    d = shape_display(t, None, "tokens", "map", 400, 900, None)
    assert d.fits("tokens", "map", 420, 1000, None)
    assert not d.fits("tokens", "map", 400, 1200, None)            # grown past 1.25x
    assert not d.fits("tokens", "map", 400, 900, 0.5)              # now on the log scale
    assert not d.fits("tokens", "top_k", 400, 900, None)
    n = shape_display(t, None, "tokens", "row_norm", 400, 900, None)
    assert n.fits("tokens", "row_norm", 50, 3000, 0.5)
    # No tensor kept (statistics only): nothing to make.
    assert shape_display(None, None, "none", "map", 400, 900, None) is None
