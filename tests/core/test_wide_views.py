"""The numbers behind the wide and heavy-tailed views, against plain torch."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from hookscope.core.views.map_window import Window, pool_window, visible_window
from hookscope.core.views.wide_views import (log_histogram, log_ticks, row_norms, signed_exp,
                                             signed_log, top_k_picture, top_units,
                                             typical_magnitude, unit_norms, value_decades,
                                             wants_log, wide_views)


@pytest.fixture
def tokens():
    torch.manual_seed(3)
    return torch.randn(2, 9, 40)


def test_token_norms_and_unit_norms_are_torch_norms_of_the_first_sample(tokens):
    x = tokens[0]
    assert np.allclose(row_norms(tokens, "tokens"), torch.linalg.norm(x, dim=1).numpy(), rtol=1e-6)
    assert np.allclose(unit_norms(tokens, "tokens"), torch.linalg.norm(x, dim=0).numpy(), rtol=1e-6)


def test_batch_by_units_norms_go_over_rows_and_units():
    torch.manual_seed(4)
    t = torch.randn(6, 300)
    assert np.allclose(row_norms(t, "heatmap"), torch.linalg.norm(t, dim=1).numpy(), rtol=1e-6)
    assert np.allclose(unit_norms(t, "heatmap"), torch.linalg.norm(t, dim=0).numpy(), rtol=1e-6)


def test_feature_map_norms_are_per_position_and_per_channel():
    torch.manual_seed(5)
    t = torch.randn(2, 7, 4, 5)
    per_position = torch.linalg.norm(t[0], dim=0).reshape(-1)   # over channels, y-major
    per_channel = torch.linalg.norm(t[0].reshape(7, -1), dim=1)
    assert np.allclose(row_norms(t, "feature_maps"), per_position.numpy(), rtol=1e-6)
    assert np.allclose(unit_norms(t, "feature_maps"), per_channel.numpy(), rtol=1e-6)


def test_non_finite_values_count_as_zero_in_a_norm(tokens):
    t = tokens.clone()
    t[0, 2, 5] = float("nan")
    t[0, 3, 6] = float("inf")
    clean = tokens[0].clone()
    clean[2, 5] = clean[3, 6] = 0
    assert np.allclose(row_norms(t, "tokens"), torch.linalg.norm(clean, dim=1).numpy(), rtol=1e-6)


def test_top_units_are_torch_topk_of_the_mean_absolute_activation(tokens):
    t = tokens.clone()
    t[0, :, 17] *= 50   # an outlier feature, as GPT-2's MLPs have
    units = top_units(t, "tokens", k=5)
    expected = torch.topk(t[0].abs().mean(dim=0), 5).indices
    assert units.tolist() == expected.tolist() and units[0] == 17
    pic = top_k_picture(t, "tokens", units)
    assert torch.equal(pic, t[0][:, expected])


def test_top_units_of_before_and_after_are_one_choice(tokens):
    before = tokens.clone()
    before[0, :, 3] *= 40
    after = before.clamp(-1, 1)            # the clamp flattens unit 3 ...
    units = top_units(after, "tokens", k=4, also=before)
    score = torch.maximum(after[0].abs().mean(0), before[0].abs().mean(0))
    assert units.tolist() == torch.topk(score, 4).indices.tolist() and 3 in units


def test_wide_views_are_offered_for_wide_shapes_only():
    assert wide_views((1, 128, 3072), "tokens")[0] == "map"
    assert "top_k" in wide_views((8, 4096), "heatmap")
    assert wide_views((1, 64, 8, 8), "feature_maps")
    assert wide_views((1, 4096), "heatmap") == ()   # a folded vector: one map only
    assert wide_views((1, 10), "bars") == () and wide_views(None, "none") == ()


def test_signed_log_is_odd_monotonic_and_inverted_by_signed_exp():
    x = np.array([-2.8e8, -3.0, -1e-4, 0.0, 1e-4, 0.5, 7.0, 2.8e8])
    y = signed_log(x, 0.5)
    assert np.all(np.diff(y) > 0) and y[3] == 0 and np.allclose(y, -signed_log(-x, 0.5))
    assert np.allclose(signed_exp(y, 0.5), x, rtol=1e-9)
    assert np.isnan(signed_log(np.array([np.nan]), 1.0)[0])


def test_a_heavy_tailed_tensor_wants_a_log_scale_and_a_normal_one_does_not():
    torch.manual_seed(6)
    normal = torch.randn(200_000)
    heavy = torch.exp(4 * torch.randn(200_000))   # log-normal: ~8 decades from median to max
    a = heavy.abs()
    expected = float(torch.log10(a.max() / a.median()))
    assert value_decades(heavy) == pytest.approx(expected, abs=0.05)
    assert wants_log(value_decades(heavy)) and not wants_log(value_decades(normal))
    # the typical |value| is the median of a 65k-value strided sample: within a few percent
    assert typical_magnitude(heavy) == pytest.approx(float(a.median()), rel=0.03)
    assert value_decades(torch.zeros(10)) == 0.0


def test_one_outlier_off_the_sample_still_counts_as_a_wide_spread():
    # The largest |value| is read from every value, not from the median's strided sample:
    # one huge activation among two million is the case a log scale is for.
    torch.manual_seed(7)
    t = torch.randn(2_000_000)
    t[1_234_567] = -3e9  # not on the sample's stride
    assert wants_log(value_decades(t))
    assert not wants_log(value_decades(torch.randn(2_000_000)))
    t[5] = float("nan")  # a NaN or an infinity is left out, the outlier still counts
    t[6] = float("inf")
    assert wants_log(value_decades(t))
    assert value_decades(torch.tensor([float("nan"), float("inf")])) == 0.0


def test_log_histogram_counts_the_transformed_values_in_shared_bins():
    torch.manual_seed(7)
    a = torch.exp(3 * torch.randn(5000)) * torch.sign(torch.randn(5000))
    b = a.clamp(-10, 10)
    edges, (ca, cb) = log_histogram([a, b], scale=1.0, bins=40)
    assert np.allclose(edges, np.linspace(float(signed_log(a.min().numpy(), 1.0)),
                                          float(signed_log(a.max().numpy(), 1.0)), 41))
    assert np.array_equal(ca, np.histogram(signed_log(a.numpy(), 1.0), bins=edges)[0])
    assert np.array_equal(cb, np.histogram(signed_log(b.numpy(), 1.0), bins=edges)[0])


def test_log_ticks_label_real_values_at_their_transformed_places():
    ticks = log_ticks(-1e3, 2.8e8, 0.7)
    assert (0.0, "0") in ticks and any(label == "1e8" for _, label in ticks)
    for pos, label in ticks:
        assert signed_exp(pos, 0.7) == pytest.approx(float(label), rel=1e-9, abs=1e-12)


def test_visible_window_of_a_zoomed_map():
    # One picture: the rows and columns in view, rounded outwards.
    assert visible_window((100.4, 200.2), (3.5, 10.0), 128, 3072) == Window("", 3, 10, 100, 201)
    assert visible_window((-5, 4000), (-1, 200), 128, 3072) is None   # all of it
    # Before | after: the side the view is on, in that copy's own columns.
    halves = (3072.0, 3264.0)
    assert visible_window((10, 20), (0, 5), 128, 3072, halves) == Window("before", 0, 5, 10, 20)
    assert visible_window((3300, 3400), (0, 5), 128, 3072, halves) == Window("after", 0, 5, 36, 136)
    assert visible_window((3000, 3400), (0, 5), 128, 3072, halves) == Window("both", 0, 5, 0, 3072)


def test_pool_window_is_the_block_mean_of_the_crop():
    torch.manual_seed(8)
    x = torch.randn(64, 300)
    w = Window("", 8, 24, 100, 260)
    got = pool_window(x, w, 8, 40)
    expected = x[8:24, 100:260].reshape(8, 2, 40, 4).mean(dim=(1, 3))
    assert np.allclose(got, expected.numpy(), atol=1e-6)
    assert np.array_equal(pool_window(x, Window("", 0, 4, 0, 5), 100, 100), x[:4, :5].numpy())


def test_the_spread_from_statistics_is_the_spread_from_every_value():
    # A panel passes its records' exact finite min/max instead of reading every
    # value again: the verdict and the log scale's knee must not change.
    from hookscope.core.engine.stats import summarize
    from hookscope.core.views.wide_views import ValueSpread, largest_finite

    torch.manual_seed(8)
    t = torch.randn(300_000)
    t[123_457] = -3e9   # off the sample's stride
    t[5] = float("nan")
    pre = torch.exp(3 * torch.randn(300_000))
    stats = [summarize(x).resolve() for x in (t, pre)]
    largest = largest_finite(*stats)
    assert largest == max(float(pre.max()), 3e9)
    spread = ValueSpread(t, pre, largest=largest)
    assert spread.decades == value_decades(t, pre) and wants_log(spread.decades)
    # beside a second tensor the first is sampled half as densely: within a few percent
    assert spread.typical == pytest.approx(typical_magnitude(t), rel=0.03)
    assert ValueSpread(pre).typical == typical_magnitude(pre)
    # Statistics that cannot say (missing, or no finite value) leave it to the tensors.
    assert largest_finite(stats[0], None) is None
    assert largest_finite(summarize(torch.tensor([float("nan"), float("inf")])).resolve()) is None
    assert ValueSpread().decades == 0.0 and ValueSpread().typical == 1.0


@pytest.mark.parametrize("c,h,w,side", [(64, 112, 112, 300), (7, 30, 20, 1000), (3, 5, 7, 300),
                                        (1, 4, 4, 300), (10, 9, 9, 50)])
def test_the_feature_grid_puts_each_channel_in_its_tile(c, h, w, side):
    # Tile i sits at grid row i // cols, column i % cols, one NaN line between
    # tiles and NaN where the grid has no channel left (laid out in one reshape).
    import math

    import torch.nn.functional as F

    from hookscope.core.views.views_by_shape import feature_grid

    torch.manual_seed(c)
    maps = torch.randn(c, h, w)
    grid = feature_grid(maps, max_side=side)
    cols = math.ceil(math.sqrt(c))
    rows = math.ceil(c / cols)
    th, tw = min(h, max(1, side // rows - 1)), min(w, max(1, side // cols - 1))
    tiles = F.adaptive_avg_pool2d(maps[None], (th, tw))[0] if (th, tw) != (h, w) else maps
    assert grid.shape == (rows * (th + 1) - 1, cols * (tw + 1) - 1) and grid.flags.c_contiguous
    for i in range(rows * cols):
        y, x = divmod(i, cols)
        cell = grid[y * (th + 1): y * (th + 1) + th, x * (tw + 1): x * (tw + 1) + tw]
        if i < c:
            np.testing.assert_array_equal(cell, tiles[i].numpy())
        else:
            assert np.isnan(cell).all()
    # the lines between tiles are blank
    assert np.isnan(grid[th::th + 1, :]).all() and np.isnan(grid[:, tw::tw + 1]).all()
