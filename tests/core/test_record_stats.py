"""Shared histogram ranges and the fraction an intervention changed, on both stats paths."""

import math

import numpy as np
import pytest
import torch

from hookscope.core.engine.record_stats import changed_count, summarize_shared


@pytest.mark.parametrize("deferred", [False, True])
def test_shared_range_is_the_union_and_bins_match_numpy(deferred):
    g = torch.Generator().manual_seed(0)
    a = torch.randn(500, generator=g)
    b = a * 3 + 1
    # extra: the range of a baseline summarised earlier (statistics only)
    pa, pb = summarize_shared([a, b], extra=[(-7.0, -7.0 + 1e-3)], deferred=deferred)
    sa, sb = pa.resolve(), pb.resolve()
    lo, hi = min(float(a.min()), float(b.min()), -7.0), max(float(a.max()), float(b.max()))
    np.testing.assert_allclose(sa.hist_edges, np.linspace(lo, hi, 65))
    np.testing.assert_array_equal(sa.hist_edges, sb.hist_edges)
    want, _ = np.histogram(b.numpy().astype(np.float64), bins=64, range=(lo, hi))
    assert np.abs(sb.hist_counts - want).sum() <= 2  # bin-edge rounding only


@pytest.mark.parametrize("deferred", [False, True])
def test_constant_and_non_finite_values(deferred):
    c = torch.full((4,), 2.0)
    s1, s2 = (p.resolve() for p in summarize_shared([c, c.clone()], deferred=deferred))
    assert s1.hist_edges[0] < 2.0 < s1.hist_edges[-1] and s1.hist_counts.sum() == 4
    nan = torch.tensor([math.nan, 1.0, math.inf])
    s3, s4 = (p.resolve() for p in summarize_shared([nan, torch.tensor([0.0, 3.0])], deferred=deferred))
    assert (s3.hist_edges[0], s3.hist_edges[-1]) == pytest.approx((0.0, 3.0))
    assert s3.nan_count == 1 and s3.inf_count == 1


def test_changed_count_treats_nan_as_equal_and_works_for_every_dtype():
    pre = torch.tensor([1.0, math.nan, 3.0, math.nan])
    post = torch.tensor([1.0, math.nan, 0.0, 2.0])
    assert int(changed_count(pre, post)) == 2
    ids = torch.tensor([1, 2, 3])
    assert int(changed_count(ids, ids.clamp(max=2))) == 1
    assert int(changed_count(torch.tensor([True, False]), torch.tensor([True, True]))) == 1
    assert changed_count(torch.zeros(2), torch.zeros(3)) is None


def test_matches_baseline_compares_the_tensors_it_holds_now():
    from hookscope.core.engine.capture_record import CaptureRecord

    t = torch.arange(6.0).reshape(2, 3)
    rec = CaptureRecord("a", 0, tensor=t, baseline_tensor=t.clone())
    assert rec.matches_baseline() and rec.matches_baseline()  # the second answer is remembered
    rec.tensor = t + 1  # a record given another tensor is compared again
    assert not rec.matches_baseline()
    rec.baseline_tensor = t + 1
    assert rec.matches_baseline()
    rec.baseline_tensor = torch.zeros(3, 2)  # another shape
    assert not rec.matches_baseline()
    assert not CaptureRecord("a", 0, tensor=t).matches_baseline()  # no baseline
