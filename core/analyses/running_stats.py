"""Statistics of a layer's activations over many inputs, one batch at a time.

:class:`Moments`: count, min, max, mean and the sum of squared deviations, merged with
Chan et al.'s pairwise formula (``M2 = M2a + M2b + d^2 * na * nb / n``), so shards
computed apart (another process, a Ray actor) merge to the numbers one pass gives, up
to rounding; float64 throughout. NaN and ±Inf are counted apart and left out.

:class:`AlignedHistogram`: a histogram that needs no first pass and merges exactly.
Bins are ``[k*w, (k+1)*w)`` for integers ``k``, with ``w`` a power of two, and at most
``bins`` of them. When a batch reaches outside, ``w`` doubles (two neighbouring bins
become one, exactly, because the grid is aligned at 0) until every value fits. The
width the final histogram has is the smallest power of two at which the whole set's
range fits in ``bins`` bins (and no finer than 2**-40 of its largest magnitude), whatever the order of the batches or shards, so its counts
are the set's, not an approximation of them; between ``bins/2`` and ``bins`` bins are
used. (Fixed edges from a first pass would cost a second forward over the set.)
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import torch

#: the finest bins: 2**-40, and no finer than 2**-40 of the largest magnitude (so bin
#: numbers stay below 2**41 and every edge is exact in float64)
_MIN_EXP = -40


def finest_exp(vmin: float, vmax: float) -> int:
    """The exponent of the finest bin width allowed for values in ``[vmin, vmax]``."""
    big = max(abs(vmin), abs(vmax))
    return max(_MIN_EXP, (math.frexp(big)[1] if big > 0 else _MIN_EXP) + _MIN_EXP)


@dataclass
class Moments:
    count: int = 0
    mean: float = 0.0
    m2: float = 0.0
    min: float = math.inf
    max: float = -math.inf
    nonfinite: int = 0

    def add(self, x: torch.Tensor) -> None:
        """Fold in every value of ``x`` (on its own device; four numbers cross to the CPU)."""
        flat = x.detach().reshape(-1)
        if not flat.is_floating_point():
            flat = flat.double()
        fin = torch.isfinite(flat)
        n_fin = int(fin.sum())
        self.nonfinite += flat.numel() - n_fin
        if n_fin == 0:
            return
        v = flat if n_fin == flat.numel() else flat[fin]
        v = v.double()
        mean = float(v.mean())
        m2 = float(((v - mean) ** 2).sum())
        self.merge(Moments(n_fin, mean, m2, float(v.min()), float(v.max())))

    def merge(self, o: "Moments") -> None:
        self.nonfinite += o.nonfinite
        if o.count == 0:
            return
        if self.count == 0:
            self.count, self.mean, self.m2, self.min, self.max = o.count, o.mean, o.m2, o.min, o.max
            return
        n = self.count + o.count
        d = o.mean - self.mean
        self.mean += d * o.count / n
        self.m2 += o.m2 + d * d * self.count * o.count / n
        self.count = n
        self.min, self.max = min(self.min, o.min), max(self.max, o.max)

    @property
    def std(self) -> float:
        """The population standard deviation (``torch.std(unbiased=False)``)."""
        return math.sqrt(self.m2 / self.count) if self.count else math.nan


@dataclass
class AlignedHistogram:
    bins: int = 64
    exp: int | None = None      # bin width 2**exp; None while empty
    lo: int = 0                 # index k of the first bin
    counts: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    vmin: float = math.inf      # the finite values' range (what decides the width)
    vmax: float = -math.inf

    def _fits(self, vmin: float, vmax: float, exp: int) -> bool:
        w = 2.0 ** exp
        return math.floor(vmax / w) - math.floor(vmin / w) < self.bins

    def width_for(self, vmin: float, vmax: float) -> int:
        """The exponent of the smallest width at which ``[vmin, vmax]`` fits ``bins`` bins."""
        span = vmax - vmin
        floor = finest_exp(vmin, vmax)
        exp = floor if span <= 0 else max(floor, math.floor(math.log2(span / self.bins)))
        while not self._fits(vmin, vmax, exp):
            exp += 1
        return exp

    def _coarsen(self, exp: int) -> None:
        """Widen the bins to ``2**exp`` (each new bin the sum of the old ones inside it)."""
        if self.exp is None or exp <= self.exp:
            return
        shift = exp - self.exp
        ks = np.arange(self.lo, self.lo + len(self.counts)) >> shift  # floor division by 2**shift
        new_lo = int(ks[0])
        out = np.zeros(int(ks[-1]) - new_lo + 1, dtype=np.int64)
        np.add.at(out, ks - new_lo, self.counts)
        self.exp, self.lo, self.counts = exp, new_lo, out

    def add(self, x: torch.Tensor) -> None:
        v = x.detach().reshape(-1).double()
        v = v[torch.isfinite(v)]
        if v.numel() == 0:
            return
        self.vmin, self.vmax = min(self.vmin, float(v.min())), max(self.vmax, float(v.max()))
        exp = self.width_for(self.vmin, self.vmax)
        if self.exp is not None:
            exp = max(exp, self.exp)
            self._coarsen(exp)
        k = torch.floor(v / (2.0 ** exp)).long()
        kmin = int(k.min())
        counts = torch.bincount(k - kmin).cpu().numpy().astype(np.int64)
        self._place(exp, kmin, counts)

    def _place(self, exp: int, lo: int, counts: np.ndarray) -> None:
        if self.exp is None:
            self.exp, self.lo, self.counts = exp, lo, counts
            self._trim()
            return
        start = min(self.lo, lo)
        end = max(self.lo + len(self.counts), lo + len(counts))
        out = np.zeros(end - start, dtype=np.int64)
        out[self.lo - start:self.lo - start + len(self.counts)] += self.counts
        out[lo - start:lo - start + len(counts)] += counts
        self.exp, self.lo, self.counts = exp, start, out
        self._trim()

    def _trim(self) -> None:
        nz = np.nonzero(self.counts)[0]
        if len(nz):
            self.lo += int(nz[0])
            self.counts = self.counts[nz[0]:nz[-1] + 1]

    def merge(self, o: "AlignedHistogram") -> None:
        if o.exp is None:
            return
        other = AlignedHistogram(o.bins, o.exp, o.lo, o.counts.copy(), o.vmin, o.vmax)
        if self.exp is None:
            self.exp, self.lo, self.counts = other.exp, other.lo, other.counts
            self.vmin, self.vmax = other.vmin, other.vmax
            return
        self.vmin, self.vmax = min(self.vmin, o.vmin), max(self.vmax, o.vmax)
        exp = max(self.exp, o.exp, self.width_for(self.vmin, self.vmax))
        self._coarsen(exp)
        other._coarsen(exp)
        self._place(exp, other.lo, other.counts)

    @property
    def edges(self) -> np.ndarray:
        """Bin edges (``len(counts) + 1`` of them); empty while nothing was added."""
        if self.exp is None:
            return np.zeros(0)
        w = 2.0 ** self.exp
        return (self.lo + np.arange(len(self.counts) + 1)) * w
