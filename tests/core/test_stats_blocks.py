"""The CPU statistics' shortcuts give the numbers the plain definitions give.

Block-wise reductions (large tensors), the changed fraction of a clamp whose
bounds lie inside or outside the data, and statistics-only records whose
histogram is binned on first read, from a copy taken in the forward.
"""

import numpy as np
import pytest
import torch
from torch import nn

from hookscope.core import Plan, run
from hookscope.core.fast import onepass
from hookscope.core.engine import stats as S
from hookscope.core.engine.stats import TensorStats, summarize


@pytest.fixture
def small_blocks(monkeypatch):
    # The torch path (the compiled kernel reads float32 in one pass, no blocks), with
    # blocks of 1000 values from 5000 on, so a small tensor takes the block path.
    monkeypatch.setattr(onepass, "KERNEL", None)
    monkeypatch.setattr(S, "MOMENT_BLOCK", 1000)
    monkeypatch.setattr(S, "BLOCKS_FROM", 5000)


def test_block_moments_equal_float64_reference(small_blocks):
    g = torch.Generator().manual_seed(4)
    x = torch.randn(12_345, generator=g) * 3 + 2  # 13 blocks, the last one short
    s = summarize(x).resolve()
    ref = x.double()
    assert (s.min, s.max) == (float(x.min()), float(x.max()))
    assert s.mean == pytest.approx(float(ref.mean()), rel=1e-7)
    assert s.std == pytest.approx(float(ref.std(correction=0)), rel=1e-6)
    assert s.hist_counts.sum() == x.numel()


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
def test_non_finite_in_a_later_block_is_counted_and_excluded(small_blocks, bad):
    x = torch.randn(9_000, generator=torch.Generator().manual_seed(5))
    x[7_777] = bad
    s = summarize(x).resolve()
    finite = x[torch.isfinite(x)].double()
    assert (s.nan_count, s.inf_count) == ((1, 0) if bad != bad else (0, 1))
    assert (s.min, s.max) == (float(finite.min()), float(finite.max()))
    assert s.mean == pytest.approx(float(finite.mean()), rel=1e-6)
    assert s.std == pytest.approx(float(finite.std(correction=0)), rel=1e-6)


@pytest.mark.parametrize("clamp", [(-10.0, 10.0), (5.0, 6.0), (-6.0, -5.0), (-0.5, 0.5), (-9.0, 0.1)])
def test_clamped_fraction_with_bounds_inside_and_outside_the_data(clamp):
    x = torch.linspace(-3, 3, 1001)
    lo, hi = clamp
    r = run(nn.Sequential(nn.Identity()), x, Plan(capture=["0"], clamp={"0": clamp}))
    rec = r.captures["0"][0]
    assert rec.stats.fraction_changed == float(((x < lo) | (x > hi)).sum()) / x.numel()
    assert rec.pre_stats.fraction_changed == rec.stats.fraction_changed


def test_stats_only_histogram_binned_on_read_from_the_value_the_layer_returned():
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(8, 300), nn.ReLU(inplace=True))  # the ReLU overwrites "0"
    x = torch.randn(64, 8)
    seen = []
    h = m[0].register_forward_hook(lambda mod, a, o: seen.append(o.detach().clone()))
    try:
        r = run(m, x, Plan(capture=["0"], keep_tensors=False))
    finally:
        h.remove()
    rec = r.captures["0"][0]
    assert not isinstance(rec._stats, TensorStats)  # not resolved yet: the first read does it
    want = summarize(seen[0]).resolve()
    got = rec.stats
    np.testing.assert_array_equal(got.hist_counts, want.hist_counts)
    np.testing.assert_array_equal(got.hist_edges, want.hist_edges)
    assert (got.min, got.max, got.mean, got.std) == (want.min, want.max, want.mean, want.std)
    assert float(seen[0].min()) < 0  # the values before the in-place ReLU were drawn


def test_histogram_sample_reaches_every_part_of_a_large_tensor():
    # Four quarters with values far apart: runs spread over the whole tensor see all four.
    n = 16 * S.HIST_SAMPLE
    x = torch.cat([torch.full((n // 4,), float(v)) for v in (0, 10, 20, 30)])
    s = summarize(x).resolve()
    assert s.hist_is_sample and s.hist_counts.sum() == S.HIST_SAMPLE
    filled = np.flatnonzero(s.hist_counts)
    assert [int(c) for c in s.hist_counts[filled]] == [S.HIST_SAMPLE // 4] * 4


@pytest.mark.parametrize("n", [S.HIST_SAMPLE + 5, 1 << 20])  # adjacent runs, spaced runs
def test_histogram_sample_is_a_copy_an_in_place_op_cannot_change(n):
    x = torch.rand(n, generator=torch.Generator().manual_seed(9))
    want = summarize(x.clone()).resolve()
    pending = summarize(x)  # statistics only: binned on first read
    x.mul_(-1.0)  # a later in-place op overwrites the layer's output
    got = pending.resolve()
    assert got.min >= 0.0
    np.testing.assert_array_equal(got.hist_counts, want.hist_counts)


@pytest.mark.parametrize("n", [100, S.HIST_SAMPLE + 5, 3 * S.HIST_SAMPLE + 7, 1 << 20])
def test_cpu_sample_holds_the_values_the_device_path_samples(n):
    from hookscope.core.views.hist_sample import hist_sample

    x = torch.randn(n, generator=torch.Generator().manual_seed(n))
    got = S._host_sample(x)
    np.testing.assert_array_equal(got, hist_sample(x).numpy())
    assert not np.shares_memory(got, x.numpy())  # a copy: the tensor may change in place later
    strided = torch.randn(2 * n, generator=torch.Generator().manual_seed(1))[::2]
    np.testing.assert_array_equal(S._host_sample(strided), hist_sample(strided).numpy())


def test_finite_values_whose_float32_sum_overflows_keep_a_finite_mean(monkeypatch):
    # Found by the property test of tests/core/test_fast_onepass.py: the torch path's float32
    # sum of two values near 1.7e38 is inf, so its mean was inf; the values are finite.
    monkeypatch.setattr(onepass, "KERNEL", None)
    x = torch.tensor([1.7014117331926443e38, 1.7014118346046923e38], dtype=torch.float32)
    s = summarize(x).resolve()
    ref = x.double()
    assert s.mean == pytest.approx(float(ref.mean()), rel=1e-12)
    assert s.std == pytest.approx(float(ref.std(correction=0)), rel=1e-6)
