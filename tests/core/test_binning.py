"""Counting values in given bins (core.binning)."""

import torch


def test_histogram_in_counts_like_numpy_with_the_ends_folded_in():
    import numpy as np

    from hookscope.core.views.binning import histogram_in

    torch.manual_seed(3)
    t = torch.randn(1000)
    t[:3] = torch.tensor([float("nan"), float("inf"), -50.0])
    edges = np.linspace(-1.0, 1.0, 11)
    got = histogram_in(t, edges)
    v = t[torch.isfinite(t)].numpy()
    want, _ = np.histogram(np.clip(v, -1.0, 1.0), bins=edges)
    np.testing.assert_array_equal(got, want)
    assert got.sum() == 998   # every finite value, the far one in the first bin
