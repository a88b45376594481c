"""The statistics-only hooks' shortest route: one kernel call in the forward.

With every layer summarised, each line of Python a layer runs inside the
forward costs several times what it costs after it (the forward has evicted it
from cache). So the hook does only :func:`plain_moments`: the compiled kernel
(:mod:`.onepass`) reads the tensor once and bins its sample, and the hook keeps
the raw numbers; :func:`plain_pending` lays them out as a :class:`PendingStats`
after the forward. Where it does not apply (not contiguous float32 on the CPU,
a NaN or infinity, nearly constant data, no kernel) :func:`.stats.summarize`
does the work.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from . import onepass
from ..views.hist_sample import SAMPLE_RUN
from ..engine.stats import HIST_BINS, N_SCALARS, PendingStats, Unbinned, hist_range


#: A kernel summary taken in the forward, not laid out yet (see :func:`plain_moments`):
#: ``(shape, count, min, max, mean, std, histogram counts as int32 bytes)``.
PlainMoments = tuple[tuple[int, ...], int, float, float, float, float, bytearray]

def plain_moments(tensor: torch.Tensor) -> PlainMoments | None:
    """The part of :func:`summarize_plain` that must run in the forward, in the fewest
    Python steps (every layer pays them, cold): the kernel's numbers, or ``None``
    where :func:`summarize` must do it. :func:`plain_pending` lays them out later."""
    kernel = onepass.KERNEL
    if kernel is None:
        return None
    n = tensor.numel()
    if n == 0 or not onepass.applies(tensor):
        return None
    runs, step = onepass.sample_layout(n)
    mn, mx, total, sumsq, counts = kernel.summary_f32(tensor.data_ptr(), n, onepass.threads(),
                                                      runs, step, SAMPLE_RUN, HIST_BINS)
    mean = total / n
    var = sumsq / n - mean * mean
    # Written so that a NaN anywhere fails it: the torch path then counts them.
    if not (1e-4 * mean * mean < var < math.inf and -math.inf < mn and mx < math.inf):
        return None
    return tuple(tensor.shape), n, mn, mx, mean, math.sqrt(var), counts


def plain_pending(got: PlainMoments) -> PendingStats:
    """The :class:`PendingStats` of a :func:`plain_moments` result."""
    shape, n, mn, mx, mean, std, counts = got
    return PendingStats(shape, "float32", n, _KernelBinned((mn, mx, mean, std), counts))


def summarize_plain(tensor: torch.Tensor) -> PendingStats | None:
    """:func:`summarize` of ``tensor`` (its own histogram range) in the fewest
    steps, for the hooks of a statistics-only forward; ``None`` where it does not
    apply, and then :func:`summarize` does.

    It applies to a contiguous float32 CPU tensor when the compiled kernel is
    there (:mod:`.onepass`), and its values are finite and not nearly constant
    (``E[x^2] - E[x]^2`` is exact enough: see :func:`_moments_to_mean_std`). The
    kernel reads the data once and bins the sample in the same call, so no tensor
    op goes through the dispatcher and no sample waits in memory to be binned."""
    got = plain_moments(tensor)
    return plain_pending(got) if got is not None else None


_NO_SAMPLE = np.empty(0, dtype=np.float32)  # the kernel binned it: nothing to keep


class _KernelBinned(Unbinned):
    """A summary the kernel finished in the forward (:func:`summarize_plain`): four
    numbers and the histogram's counts, laid out as the vector when first read."""

    __slots__ = ("raw", "counts")

    def __init__(self, raw: tuple[float, float, float, float], counts: bytearray):
        super().__init__(None, _NO_SAMPLE)  # type: ignore[arg-type]  # see _laid_out
        self.raw = raw  # (min, max, mean, std) of an all-finite tensor
        self.counts = counts

    def _laid_out(self) -> np.ndarray:
        if self.vector is None:
            mn, mx, mean, std = self.raw
            out = np.empty(N_SCALARS + HIST_BINS, dtype=np.float64)
            out[:N_SCALARS] = (mn, mx, mean, std, 0, 0, *hist_range(mn, mx))
            self.vector = out
        return self.vector

    def __getitem__(self, i: int) -> float:
        return float(self._laid_out()[i])

    def binned(self) -> np.ndarray:
        v = self._laid_out()
        v[N_SCALARS:] = np.frombuffer(self.counts, dtype=np.int32)
        return v
