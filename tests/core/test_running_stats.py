"""Streamed statistics: Chan's merge equals one pass over everything, and the aligned
histogram's counts are the set's, whatever the order of batches or shards."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from hookscope.core.analyses import AlignedHistogram, Moments
from hookscope.core.analyses.running_stats import finest_exp


def _batches(seed: int, n: int = 7) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(int(torch.randint(1, 300, (1,), generator=g)), generator=g)
            * float(10 ** torch.randint(-2, 3, (1,), generator=g)) + 1e4 for _ in range(n)]


def _check_moments(m: Moments, allv: torch.Tensor) -> None:
    v = allv.double()
    assert m.count == v.numel()
    assert m.min == float(v.min()) and m.max == float(v.max())
    assert math.isclose(m.mean, float(v.mean()), rel_tol=1e-12)
    assert math.isclose(m.std, float(v.std(unbiased=False)), rel_tol=1e-9)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_moments_streamed_and_merged_equal_one_pass(seed):
    bs = _batches(seed)
    one = Moments()
    for b in bs:
        one.add(b)
    _check_moments(one, torch.cat(bs))
    left, right = Moments(), Moments()
    for b in bs[:3]:
        left.add(b)
    for b in bs[3:]:
        right.add(b)
    right.merge(left)  # the other order of shards
    _check_moments(right, torch.cat(bs))


def test_moments_count_nonfinite_apart():
    m = Moments()
    m.add(torch.tensor([1.0, float("nan"), 3.0, float("inf"), -float("inf")]))
    assert m.count == 2 and m.nonfinite == 3 and m.mean == 2.0 and m.min == 1.0


def _hist_of(bs: list[torch.Tensor], bins: int = 64) -> AlignedHistogram:
    h = AlignedHistogram(bins)
    for b in bs:
        h.add(b)
    return h


def _check_hist(h: AlignedHistogram, allv: torch.Tensor) -> None:
    v = allv.double().numpy()
    assert 1 <= len(h.counts) <= h.bins
    assert int(h.counts.sum()) == len(v)
    edges = h.edges
    # the bins are [e_i, e_i+1): numpy's last bin is closed, ours is not, so count by hand
    k = np.floor(v / (edges[1] - edges[0])).astype(np.int64) - h.lo
    assert k.min() >= 0 and k.max() < len(h.counts)
    assert np.array_equal(np.bincount(k, minlength=len(h.counts)), h.counts)
    # the smallest power-of-two width at which the range fits (or the finest allowed)
    w = edges[1] - edges[0]
    assert (np.floor(v.max() / (w / 2)) - np.floor(v.min() / (w / 2)) >= h.bins
            or w == 2.0 ** finest_exp(float(v.min()), float(v.max())))


@settings(max_examples=40, deadline=None)
@given(st.lists(st.lists(st.floats(-1e6, 1e6, allow_nan=False, width=32), min_size=1,
                         max_size=40), min_size=1, max_size=6), st.randoms())
def test_histogram_is_exact_and_order_free(groups, rnd):
    bs = [torch.tensor(g, dtype=torch.float32) for g in groups]
    h = _hist_of(bs, 16)
    _check_hist(h, torch.cat(bs))
    shuffled = list(bs)
    rnd.shuffle(shuffled)
    cut = rnd.randint(0, len(shuffled))
    a, b = _hist_of(shuffled[:cut], 16), _hist_of(shuffled[cut:], 16)
    b.merge(a)
    assert b.exp == h.exp and b.lo == h.lo and np.array_equal(b.counts, h.counts)


def test_histogram_of_equal_values_and_of_nothing():
    h = _hist_of([torch.full((5,), 3.25)])
    assert int(h.counts.sum()) == 5 and len(h.counts) == 1 and h.edges[0] <= 3.25 < h.edges[1]
    empty = _hist_of([torch.tensor([float("nan")])])
    assert empty.exp is None and len(empty.edges) == 0
