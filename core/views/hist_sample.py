"""The histogram's sample of a large tensor, and binning it on the host.

A histogram of 64 bins draws the same shape from 16k values as from millions,
and binning costs more per value than the exact reductions, so a tensor of
more than :data:`HIST_SAMPLE` values is binned from a sample: evenly spaced
runs of adjacent values that reach every part of it (see :data:`SAMPLE_RUN`).
"""

from __future__ import annotations

import numpy as np
import torch


#: Above this many values the histogram bins a sample of this size: 64 bins
#: of ~250 values each draw the same shape, and binning costs ~6 ns a value
#: on the CPU, far more than min/max/sum (with every leaf summarised,
#: 32k-value samples were a third of the statistics' cost).
HIST_SAMPLE = 1 << 14
#: The sample is :data:`HIST_SAMPLE` // SAMPLE_RUN evenly spaced runs of this many
#: adjacent values (64 bytes of float32: one cache line). Single values at an even
#: stride touch one cache line each, 16,384 lines of a tensor most likely no longer
#: in cache: on ResNet-18 at batch 8 and two threads that gather cost 12 ms a
#: forward, more than a third of what the reductions of every value cost; runs
#: touch 1,024 lines (3-4 ms) and still reach every part of the tensor (each
#: channel of a conv output of 512 planes gets about two).
SAMPLE_RUN = 16


def sample_runs(n: int) -> tuple[int, int]:
    """How many runs a sample of ``n`` > :data:`HIST_SAMPLE` values takes, and how far
    apart they start (>= SAMPLE_RUN, since n > HIST_SAMPLE)."""
    runs = HIST_SAMPLE // SAMPLE_RUN
    return runs, n // runs


def hist_sample(values: torch.Tensor) -> torch.Tensor:
    """``values`` itself, or a new tensor of :data:`HIST_SAMPLE` of them: evenly spaced
    runs of :data:`SAMPLE_RUN` adjacent values of the 1-D ``values``."""
    n = values.numel()
    if n <= HIST_SAMPLE:
        return values
    runs, step = sample_runs(n)
    picked = values.unfold(0, SAMPLE_RUN, step)[:runs].reshape(-1)
    # reshape copies the windows, unless they are adjacent (step == SAMPLE_RUN) and it can view
    return picked.clone() if picked._is_view() else picked


def histogram_np(x: np.ndarray, lo: float, hi: float, bins: int) -> np.ndarray:
    """Counts of float64 ``x`` (modified), all within [lo, hi], in ``bins`` equal bins over
    it (top edge in the last bin).

    Index arithmetic plus ``bincount`` is about twice as fast as ``histc`` and
    bins values the same way (up to rounding at bin edges); NumPy because each
    call is small."""
    x -= lo
    x *= bins / (hi - lo)
    idx = x.astype(np.int64)
    np.minimum(idx, bins - 1, out=idx)  # np.clip costs more than the data on small samples
    np.maximum(idx, 0, out=idx)
    return np.bincount(idx, minlength=bins)
