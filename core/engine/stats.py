"""Summaries of a tensor computed where the tensor lives.

A large activation should never have to cross to the CPU whole just to be
plotted: min, max, mean, std, NaN/Inf counts and a fixed-bin histogram are
reduced on the tensor's own device, and only that
small vector is transferred. The fraction an intervention changed is not
counted here: the capture record compares the values before and after it.

Two reduction paths give the same numbers:

* the *eager* path (CPU): reads min/max back at once (free on the CPU) and
  uses them to pick the cheapest route, e.g. skipping the NaN/Inf pass when
  min and max are finite. Where ``hookscope.core.fast`` plugs in its compiled
  one-pass kernel (:mod:`.fast_slot`), float32 goes through it;
* the *deferred* path (CUDA and other accelerators): never synchronises; every
  quantity stays a device tensor until :func:`resolve_all` moves all pending
  summaries of a forward pass to the host in one transfer.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Iterable

import numpy as np
import torch

from . import fast_slot
from ..views.hist_sample import HIST_SAMPLE, hist_sample, histogram_np

__all__ = ["HIST_BINS", "HIST_SAMPLE", "N_SCALARS", "PendingStats", "TensorStats", "Unbinned",
           "hist_range", "hist_sample", "resolve_all", "summarize"]

#: Histogram bins used everywhere (plots, JSON, CLI).
HIST_BINS = 64

# Layout of the summary vector: scalars first, then the histogram counts.
_MIN, _MAX, _MEAN, _STD, _NAN, _INF, _FMIN, _FMAX = range(8)
#: How many scalars open a summary vector (min, max, mean, std, NaN and Inf counts,
#: the histogram's range); a speed-up's kernel lays its summaries out the same way.
N_SCALARS = 8


@dataclass(frozen=True)
class TensorStats:
    """Summary of one tensor.

    ``std`` is the population standard deviation (``correction=0``) over the
    finite values; ``min``/``max``/``mean`` are over the finite values too, so
    a single NaN does not hide the rest. ``hist_counts`` has
    :data:`HIST_BINS` bins spanning ``hist_edges`` (finite values only);
    for a tensor of more than :data:`HIST_SAMPLE` values they count a sample
    of evenly spaced runs (:attr:`hist_is_sample`), min/max/mean/std stay exact.
    ``fraction_changed`` is the fraction of values the layer's intervention
    changed (any kind; ``fraction_clamped`` is its older name), or ``None``
    where no intervention applies.
    """

    shape: tuple[int, ...]
    dtype: str
    count: int
    min: float
    max: float
    mean: float
    std: float
    nan_count: int
    inf_count: int
    hist_counts: np.ndarray = field(repr=False)
    hist_edges: np.ndarray = field(repr=False)
    fraction_changed: float | None = None

    @property
    def fraction_clamped(self) -> float | None:
        """Older name of :attr:`fraction_changed`."""
        return self.fraction_changed

    @property
    def hist_is_sample(self) -> bool:
        """True when the histogram counts a sample rather than every value."""
        return int(self.hist_counts.sum()) < self.count - self.nan_count - self.inf_count

    def to_dict(self, with_histogram: bool = False) -> dict:
        """Plain JSON-ready dictionary."""
        d = {
            "shape": list(self.shape),
            "dtype": self.dtype,
            "count": self.count,
            "min": self.min,
            "max": self.max,
            "mean": self.mean,
            "std": self.std,
            "nan_count": self.nan_count,
            "inf_count": self.inf_count,
        }
        if self.fraction_changed is not None:
            d["fraction_changed"] = self.fraction_changed
        if with_histogram:
            d["hist_counts"] = self.hist_counts.tolist()
            d["hist_edges"] = self.hist_edges.tolist()
        return d


class PendingStats:
    """A summary whose numbers may still live on the device.

    Created by :func:`summarize`; turned into :class:`TensorStats` by
    :meth:`resolve` or, for many at once with one transfer, :func:`resolve_all`.
    """

    __slots__ = ("shape", "dtype", "count", "vector", "_resolved")

    def __init__(self, shape: tuple[int, ...], dtype: str, count: int,
                 vector: "torch.Tensor | np.ndarray | Unbinned"):
        self.shape = shape
        self.dtype = dtype
        self.count = count
        # float64, N_SCALARS + HIST_BINS long: a device tensor, or on the CPU a NumPy
        # array or an Unbinned one (the scalars ready, the histogram binned on resolve)
        self.vector = vector
        self._resolved: TensorStats | None = None

    def resolve(self) -> TensorStats:
        if self._resolved is None:
            resolve_all([self])
        assert self._resolved is not None
        return self._resolved

    def _finish(self, host: np.ndarray) -> None:
        self._resolved = _from_vector(self.shape, self.dtype, self.count, host)
        self.vector = None  # type: ignore[assignment]  # free the device copy


def resolve_all(pending: Iterable[PendingStats], bin_histograms: bool = True) -> None:
    """Move every pending summary to the host in one transfer per device.

    ``bin_histograms=False`` leaves CPU summaries whose histogram is still to
    bin as they are (their :meth:`PendingStats.resolve` bins it)."""
    todo = [p for p in pending if p._resolved is None]
    by_device: dict[torch.device, list[PendingStats]] = {}
    for p in todo:
        if isinstance(p.vector, np.ndarray):  # computed on the CPU: already on the host
            p._finish(p.vector)
            continue
        if isinstance(p.vector, Unbinned):  # on the CPU, histogram still to bin
            if bin_histograms:
                p._finish(p.vector.binned())
            continue
        by_device.setdefault(p.vector.device, []).append(p)
    for items in by_device.values():
        host = torch.stack([p.vector for p in items if isinstance(p.vector, torch.Tensor)]).cpu().numpy()
        for p, row in zip(items, host):
            p._finish(row)


def summarize(
    tensor: torch.Tensor,
    bins: int = HIST_BINS,
    deferred: bool | None = None,
    hist_range: tuple | None = None,
) -> PendingStats:
    """Start summarising ``tensor`` on its own device.

    Parameters
    ----------
    tensor
        Any tensor; integer, boolean and low-precision floats are summarised in
        float32, complex ones by their magnitude.
    deferred
        Force the no-synchronisation path (default: only off the CPU).
    hist_range
        ``(lo, hi)`` histogram range to use (floats, or 0-d tensors on the
        tensor's device) that spans the tensor's finite values, e.g. the union
        of several tensors' ranges so their histograms compare bin by bin (a
        clamp's values before and after it: the values piled up at the bounds show
        as spikes in the bins of the values before it).
    """
    x = tensor.detach()
    shape = tuple(x.shape)
    dtype = str(x.dtype).removeprefix("torch.")
    count = x.numel()
    if deferred is None:
        deferred = x.device.type != "cpu"
    vec: torch.Tensor | np.ndarray | Unbinned
    if count == 0:
        vec = torch.full((N_SCALARS + bins,), 0.0, dtype=torch.float64, device=x.device)
        vec[: N_SCALARS] = float("nan")
        vec[_NAN] = vec[_INF] = 0.0
        return PendingStats(shape, dtype, count, vec)
    flat = x.reshape(-1)
    if flat.is_complex():
        flat = flat.abs()  # complex values are summarised by their magnitude
    if flat.dtype not in (torch.float32, torch.float64):
        flat = flat.float()
    if deferred:
        on_device = None if hist_range is None else tuple(
            torch.as_tensor(v, dtype=torch.float64, device=flat.device) for v in hist_range)
        vec = _summary_deferred(flat, bins, on_device)
    else:
        rng = (float(hist_range[0]), float(hist_range[1])) if hist_range is not None else None
        # A given hist_range spans the values (the union of several ranges): no value
        # falls outside it.
        vec = _summary_eager(flat, bins, rng)
    return PendingStats(shape, dtype, count, vec)


#: Values per block of :func:`_moments`: 4 MiB of float32, 2 MiB per thread at
#: torch's default of two threads here, so the second and third reductions of a
#: block read it from cache, not from memory.
MOMENT_BLOCK = 1 << 20
#: Tensors of at least this many values (16 MiB of float32) are reduced by blocks.
#: A smaller one was most likely just written by the layer and still sits in L3
#: (32 MiB here), where three whole-tensor passes beat the per-block op cost.
#: Measured at two threads on a just-written tensor (three whole passes / by
#: blocks of 256k, 1M values): 25.7 MiB 4.0 / 4.3 / 3.3 ms; 12.8 MiB 1.15 /
#: 1.7 / 1.5 ms; 6.4 MiB 0.42 / 0.52 / 0.42 ms. One aminmax: 1.34, 0.55, 0.19 ms.
BLOCKS_FROM = 1 << 22


def _moments(flat: torch.Tensor) -> tuple[float, float, float, float] | None:
    """``(min, max, sum, sum of squares)`` of a 1-D float tensor; ``None`` when it
    holds a NaN or an infinity (min/max propagate NaN, so this detects both).

    A large tensor is reduced block by block, ``aminmax``, ``sum`` and ``dot``
    on each block in turn: the first read brings the block into cache, the
    other two read it from there, so the tensor crosses from memory about once.
    Block partials are combined in float64, more exact than one float32 pass.
    """
    n = flat.numel()
    if n < BLOCKS_FROM:
        mn_t, mx_t = torch.aminmax(flat)
        # One read-back for the four numbers: each .item() is a round trip through the
        # dispatcher (~3 µs), and a NaN or infinity only makes the sums NaN, never wrong.
        mn, mx, total, sumsq = torch.stack((mn_t, mx_t, flat.sum(), torch.dot(flat, flat))).tolist()
        if not (math.isfinite(mn) and math.isfinite(mx)):
            return None
        return mn, mx, total, sumsq
    parts: list[torch.Tensor] = []
    for start in range(0, n, MOMENT_BLOCK):
        block = flat[start:start + MOMENT_BLOCK]
        parts.extend(torch.aminmax(block))
        parts.append(block.sum())
        parts.append(torch.dot(block, block))
    host = torch.stack(parts).tolist()  # one read back for every block
    mins, maxs = host[0::4], host[1::4]
    # Every block's: Python's min() would skip a NaN that is not first.
    if not (all(map(math.isfinite, mins)) and all(map(math.isfinite, maxs))):
        return None
    mn, mx = min(mins), max(maxs)
    return mn, mx, math.fsum(host[2::4]), math.fsum(host[3::4])


_F32_TINY = float(torch.finfo(torch.float32).tiny)


def _moments_to_mean_std(values: torch.Tensor, total: float, sumsq: float) -> tuple[float, float]:
    """Population mean and std from a sum and a sum of squares.

    E[x^2] - E[x]^2 in float32 loses the digits of mean^2/var: sums good to a few
    float32 ulps (1e-7) left the std of [3.17e16, 3.10e16, 3.10e16] 1e-3 off. Where
    mean^2 > 10 var the exact two-pass variance (float64) is used instead; elsewhere
    the std stays within about 1e-6. A float32 sum overflows for finite
    values near ±3.4e38 (two values of 1.7e38): then the mean is taken in
    float64 too, where it cannot overflow."""
    n = values.numel()
    mean = total / n
    if not math.isfinite(mean):
        mean = float(values.double().mean())
    var = sumsq / n - mean * mean
    # The sum of squares is float32 for float32 values: squares under its smallest
    # normal number (|x| < 1.1e-19) keep few bits or none (one value of 6e-23 gave a
    # std of 2.4e-23, not 0). There, too, the exact two-pass variance.
    if (var <= 0.1 * mean * mean or not math.isfinite(var)
            or sumsq < n * _F32_TINY):
        var = float(values.double().var(correction=0)) if n > 1 else 0.0
    return mean, math.sqrt(max(var, 0.0))


def _summary_eager(flat: torch.Tensor, bins: int, rng=None) -> "np.ndarray | Unbinned":
    """The CPU summary: the scalars now, the histogram when first read.

    Where a kernel is plugged in (:mod:`.fast_slot`), it may read the tensor once
    (``hookscope.core.fast.onepass``). Otherwise every value is read by
    three reductions (``aminmax``, ``sum``, a BLAS ``dot``), block by block so
    the tensor comes from memory about once (see :func:`_moments`). The
    histogram bins a copy of a sample (:data:`HIST_SAMPLE` values at most) when
    the summary is resolved, after the forward, so a forward that summarises
    every layer pays only for the copy.
    """
    kernel = fast_slot.kernel()
    fast = kernel.one_pass(flat) if kernel is not None else None
    got = fast[0] if fast is not None else _moments(flat)
    nan = inf = 0
    values = flat
    if got is None:
        # Rare path: count the non-finite values and summarise the rest.
        nan = int(torch.isnan(flat).sum())
        inf = int(torch.isinf(flat).sum())
        values = flat[torch.isfinite(flat)]
        if values.numel() == 0:
            out = np.zeros(N_SCALARS + bins, dtype=np.float64)
            out[:N_SCALARS] = [math.nan, math.nan, math.nan, math.nan, nan, inf, math.nan, math.nan]
            return out
        got = _moments(values)
        assert got is not None  # only finite values are left
    mn, mx, total, sumsq = got
    mean, std = _moments_to_mean_std(values, total, sumsq)
    if rng is not None and all(map(math.isfinite, rng)):
        lo_e, hi_e = rng
    else:
        lo_e, hi_e = hist_range(mn, mx)
    out = np.empty(N_SCALARS + bins, dtype=np.float64)
    out[:N_SCALARS] = (mn, mx, mean, std, nan, inf, lo_e, hi_e)
    # A copy (the tensor may be overwritten in place after this call) in the tensor's
    # own dtype: 64 KiB a layer at most while it waits to be binned.
    sample = fast[1] if fast is not None else _host_sample(values)
    return Unbinned(out, sample)


def _host_sample(values: torch.Tensor) -> np.ndarray:
    """A NumPy copy of :func:`hist_sample`'s values of a 1-D CPU tensor."""
    picked = hist_sample(values)
    return (picked.clone() if picked is values else picked).numpy()


class Unbinned:
    """A CPU summary vector whose histogram counts are binned when first needed (a
    speed-up's kernel summary subclasses it)."""

    __slots__ = ("vector", "sample")

    def __init__(self, vector: np.ndarray, sample: np.ndarray):
        self.vector = vector
        self.sample = sample

    def __getitem__(self, i: int) -> float:  # the scalars are ready
        return float(self.vector[i])

    def binned(self) -> np.ndarray:
        v = self.vector
        # float64: (x - lo) of float32 values near ±3e38 overflows
        v[N_SCALARS:] = histogram_np(self.sample.astype(np.float64), float(v[_FMIN]), float(v[_FMAX]),
                                      v.shape[0] - N_SCALARS)
        return v


def hist_range(mn: float, mx: float) -> tuple[float, float]:
    """The histogram's range over finite values from ``mn`` to ``mx``."""
    if mx > mn:
        return mn, mx
    # A constant tensor still gets a visible bar, centred on its value; the pad
    # grows with the value, since 1e20 - 0.5 == 1e20.
    pad = max(0.5, abs(mn) * 1e-6)
    return mn - pad, mx + pad


def _summary_deferred(flat: torch.Tensor, bins: int, rng=None) -> torch.Tensor:
    finite = torch.isfinite(flat)
    n_finite = finite.sum()
    nan = torch.isnan(flat).sum()
    inf = flat.numel() - n_finite - nan
    inf_t = torch.tensor(float("inf"), device=flat.device, dtype=flat.dtype)
    mn = torch.where(finite, flat, inf_t).amin()
    mx = torch.where(finite, flat, -inf_t).amax()
    zero = torch.zeros((), device=flat.device, dtype=flat.dtype)
    safe = torch.where(finite, flat, zero)
    # Sums in float64 (flat is float32 or float64 here): finite float32 values can sum
    # past float32's range (two of 1.7e38), and their squares far sooner. The reductions
    # are bound by reading the data, not by the adds. vector_norm squares and adds in
    # float64; only a deviation past float32's range (values of both signs near ±3.4e38)
    # still overflows.
    denom = n_finite.clamp_min(1).to(torch.float64)
    mean = safe.sum(dtype=torch.float64) / denom
    dev = torch.where(finite, safe - mean.to(safe.dtype), zero)
    norm = torch.linalg.vector_norm(dev, dtype=torch.float64)
    var = norm * norm / denom
    std = var.sqrt()
    # Same bin rule as torch.histc: width = (hi - lo) / bins, the top edge falls in the last bin.
    # Bin arithmetic in float64, as on the eager path (see hist_range, _histogram).
    r_lo, r_hi = mn.to(torch.float64), mx.to(torch.float64)
    const = r_hi <= r_lo
    pad = torch.clamp(r_lo.abs() * 1e-6, min=0.5)
    lo_e = torch.where(const, r_lo - pad, r_lo)
    hi_e = torch.where(const, r_hi + pad, r_hi)
    if rng is not None:
        ok = torch.isfinite(rng[0]) & torch.isfinite(rng[1])
        lo_e = torch.where(ok, rng[0].to(torch.float64), lo_e)
        hi_e = torch.where(ok, rng[1].to(torch.float64), hi_e)
    scale = bins / (hi_e - lo_e)
    s_safe, s_finite = hist_sample(safe).to(torch.float64), hist_sample(finite)
    pos = ((s_safe - lo_e) * scale).floor()
    inside = s_finite & (s_safe >= lo_e) & (s_safe <= hi_e) & torch.isfinite(pos)
    idx = torch.where(inside, pos, torch.zeros_like(pos)).clamp_(0, bins - 1).long()
    idx = torch.where(inside, idx, torch.full_like(idx, bins))  # non-finite/outside: spill bin
    hist = torch.bincount(idx, minlength=bins + 1)[:bins]
    empty = n_finite == 0
    nan_t = torch.tensor(float("nan"), device=flat.device, dtype=torch.float64)
    head = torch.stack([mn.to(torch.float64), mx.to(torch.float64), mean, std])
    head = torch.where(empty, nan_t, head)
    tail = torch.stack([nan.to(torch.float64), inf.to(torch.float64),
                        lo_e.to(torch.float64), hi_e.to(torch.float64)])
    return torch.cat([head, tail, hist.to(torch.float64)])


def _from_vector(shape, dtype, count, v: np.ndarray) -> TensorStats:
    bins = v.shape[0] - N_SCALARS
    lo_e, hi_e = float(v[_FMIN]), float(v[_FMAX])
    if math.isfinite(lo_e) and math.isfinite(hi_e):
        edges = np.arange(bins + 1, dtype=np.float64)  # np.linspace's formula, cheaper
        edges *= (hi_e - lo_e) / bins
        edges += lo_e
        edges[-1] = hi_e
    else:
        edges = np.zeros(bins + 1)
    return TensorStats(
        shape=tuple(shape),
        dtype=dtype,
        count=int(count),
        min=float(v[_MIN]),
        max=float(v[_MAX]),
        mean=float(v[_MEAN]),
        std=float(v[_STD]),
        nan_count=int(v[_NAN]),
        inf_count=int(v[_INF]),
        hist_counts=v[N_SCALARS:].astype(np.int64),
        hist_edges=edges,
    )
