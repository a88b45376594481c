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
range fits in ``bins`` bins, whatever the order of the batches or shards, so its counts
are the set's, not an approximation of them; between ``bins/2`` and ``bins`` bins are
used. (Fixed edges from a first pass would cost a second forward over the set.)
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import torch

#: the smallest bin width (a set of equal values still gets a bin)
_MIN_EXP = -40


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

    def _fits(self, kmin: float, kmax: float, exp: int) -> bool:
        w = 2.0 ** exp
        return math.floor(kmax / w) - math.floor(kmin / w) < self.bins

    def _width_for(self, vmin: float, vmax: float) -> int:
        span = vmax - vmin
        exp = _MIN_EXP if span <= 0 else max(_MIN_EXP, math.floor(math.log2(span / self.bins)))
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

    def _range(self) -> tuple[float, float] | None:
        if self.exp is None:
            return None
        w = 2.0 ** self.exp
        return self.lo * w, (self.lo + len(self.counts)) * w - w

    def add(self, x: torch.Tensor) -> None:
        v = x.detach().reshape(-1).double()
        v = v[torch.isfinite(v)]
        if v.numel() == 0:
            return
        vmin, vmax = float(v.min()), float(v.max())
        have = self._range()
        if have is not None:
            vmin, vmax = min(vmin, have[0]), max(vmax, have[1])
        exp = self._width_for(vmin, vmax)
        if self.exp is not None:
            exp = max(exp, self.exp)
            self._coarsen(exp)
        k = torch.floor(v / (2.0 ** exp)).long()
        kmin = min(int(k.min()), self.lo) if self.exp is not None else int(k.min())
        counts = torch.bincount(k - kmin).cpu().numpy().astype(np.int64)
        self._place(exp, kmin, counts)

    def _place(self, exp: int, lo: int, counts: np.ndarray) -> None:
        if self.exp is None:
            self.exp, self.lo, self.counts = exp, lo, counts
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
        if self.exp is None:
            self.exp, self.lo, self.counts = o.exp, o.lo, o.counts.copy()
            return
        other = AlignedHistogram(o.bins, o.exp, o.lo, o.counts.copy())
        exp = max(self.exp, o.exp)
        self._coarsen(exp)
        other._coarsen(exp)
        while True:
            start = min(self.lo, other.lo)
            end = max(self.lo + len(self.counts), other.lo + len(other.counts))
            if end - start <= self.bins:
                break
            exp += 1
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
