"""Views that stay readable when an activation is wide (768-4096 units) or
heavy-tailed (values spanning many decades). Pure torch + numpy, no Qt: a
layer panel calls these and draws what they return.

A wide activation is seen as a *picture* (rows × units): the first sample's
token × feature map of an N×T×D tensor, the batch × units of a 2-D one, or the
positions (H·W) × channels of an N×C×H×W one. Over that picture:

``map``           the picture itself (the panel's heat map or feature grid)
``row_norm``      the L2 norm of each row (a token's, a sample's or a position's vector)
``unit_norm``     the L2 norm of each unit (feature, channel) over the rows
``top_k``         the k units with the largest mean |activation|, rows × k

and, for values spanning many decades, a signed log transform
``sign(x) · log10(1 + |x| / s)`` that keeps zero at zero and the sign, with
:func:`value_decades` telling when it is worth switching on by default.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from .views_by_shape import as_float_array

#: The views a wide activation offers, in the order a chooser lists them.
WIDE_VIEWS = ("map", "row_norm", "unit_norm", "top_k")
#: Above this many decades between the largest and a typical |value|, a
#: histogram or map switches to a log scale unless the user said otherwise.
LOG_DECADES = 4.0
TOP_K = 32
# Values a typical |value| (a median) is taken from, a strided sample: the median of
# 65k values is within ~2% of the whole tensor's, and np.median of a 1M-value sample
# took 12 ms of every redraw on the GUI thread. The largest |value| is exact (_largest).
_SAMPLE = 1 << 16


def wide_views(shape: tuple[int, ...] | None, kind: str) -> tuple[str, ...]:
    """The views offered for a tensor of ``shape`` drawn as ``kind`` (see the
    module docstring); ``()`` where the one view of the shape is all there is."""
    if shape is None:
        return ()
    if kind == "tokens" and len(shape) == 3:
        return WIDE_VIEWS
    if kind == "feature_maps" and len(shape) == 4:
        return WIDE_VIEWS
    if kind == "heatmap" and len(shape) == 2 and shape[0] > 1:
        return WIDE_VIEWS
    return ()


def view_names(kind: str) -> dict[str, str]:
    """What each view is called in the chooser for a picture of ``kind``."""
    row = {"tokens": "token", "feature_maps": "position"}.get(kind, "row")
    unit = {"feature_maps": "channel"}.get(kind, "unit")
    return {"map": "Map", "row_norm": f"Per-{row} norm", "unit_norm": f"Per-{unit} norm",
            "top_k": f"Top-k {unit}s"}


def picture(t: torch.Tensor, kind: str) -> torch.Tensor:
    """The first sample of ``t`` as rows × units (float32): tokens × features,
    batch × units, or positions (row-major y, x) × channels."""
    x = as_float_array(t)
    if kind == "tokens":
        return x[0]
    if kind == "feature_maps":
        c = x.shape[1]
        return x[0].reshape(c, -1).T
    return x.reshape(x.shape[0], -1)


def _finite(x: torch.Tensor) -> torch.Tensor:
    return torch.where(torch.isfinite(x), x, torch.zeros_like(x))


def row_norms(t: torch.Tensor, kind: str) -> np.ndarray:
    """The L2 norm of each row of :func:`picture` (NaN/Inf counted as 0)."""
    return torch.linalg.vector_norm(_finite(picture(t, kind)), dim=1).numpy().copy()


def unit_norms(t: torch.Tensor, kind: str) -> np.ndarray:
    """The L2 norm of each unit (column) of :func:`picture` over its rows."""
    return torch.linalg.vector_norm(_finite(picture(t, kind)), dim=0).numpy().copy()


def unit_scores(t: torch.Tensor, kind: str) -> torch.Tensor:
    """Each unit's mean |activation| over the rows (what top-k ranks by)."""
    return _finite(picture(t, kind)).abs().mean(dim=0)


def top_units(t: torch.Tensor, kind: str, k: int = TOP_K,
              also: torch.Tensor | None = None) -> np.ndarray:
    """The indices of the ``k`` units with the largest mean |activation|, largest
    first. With ``also`` (the other side of a before | after), a unit counts by
    the larger of its two scores, so both halves show the same units."""
    scores = unit_scores(t, kind)
    if also is not None:
        other = unit_scores(also, kind)
        if other.shape == scores.shape:
            scores = torch.maximum(scores, other)
    k = max(1, min(k, scores.numel()))
    # Stable order for equal scores: the lower index first.
    order = torch.argsort(-scores, stable=True)
    return order[:k].numpy().copy()


def top_k_picture(t: torch.Tensor, kind: str, units: np.ndarray) -> torch.Tensor:
    """Rows × ``len(units)``: the picture's columns ``units``, in that order."""
    return picture(t, kind)[:, torch.as_tensor(units, dtype=torch.long)]


# -- log scale ------------------------------------------------------------------
def _magnitudes(values: torch.Tensor | np.ndarray, size: int = _SAMPLE) -> np.ndarray:
    v = torch.as_tensor(values).detach().reshape(-1)
    if v.is_complex():
        v = v.abs()
    if v.numel() > size:  # a strided sample: the spread of 1M values is the spread
        v = v[:: math.ceil(v.numel() / size)]
    a = v.float().abs().cpu().numpy()
    return a[np.isfinite(a) & (a > 0)]


def _largest(values: torch.Tensor | np.ndarray) -> float:
    """The largest finite |value| of all of ``values``, not of a sample: a single
    outlier is the case a log scale is for. One pass where every value is finite."""
    v = torch.as_tensor(values).detach().reshape(-1)
    if v.numel() == 0:
        return 0.0
    if v.is_complex():
        v = v.abs()
    if v.dtype == torch.bool:
        v = v.to(torch.uint8)
    mn, mx = (float(e) for e in torch.aminmax(v))
    if math.isfinite(mn) and math.isfinite(mx):
        return max(abs(mn), abs(mx))
    a = v.float().abs()
    a = a[torch.isfinite(a)]
    return float(a.max()) if a.numel() else 0.0


def typical_magnitude(values: torch.Tensor | np.ndarray) -> float:
    """The median nonzero finite |value| (1.0 when there is none): the scale
    ``s`` of :func:`signed_log`, where the transform turns from linear to log."""
    a = _magnitudes(values)
    return float(np.median(a)) if a.size else 1.0


def value_decades(*tensors: torch.Tensor | np.ndarray | None) -> float:
    """How many decades lie between the largest |value| and a typical one
    (:func:`typical_magnitude`) over ``tensors``; 0 for empty or all-zero ones."""
    return ValueSpread(*tensors).decades


class ValueSpread:
    """:func:`value_decades` of ``tensors`` and, on demand, the
    :func:`typical_magnitude` of the first, from one sample of each: a panel's
    redraw needs the first always and the second when the log scale is on, and
    the sample and its median were the larger part of a redraw's own work.

    ``largest``, where the caller knows it (a record's statistics hold the
    exact finite min and max of the very tensors: :func:`largest_finite`),
    saves reading every value once more.
    """

    def __init__(self, *tensors: torch.Tensor | np.ndarray | None,
                 largest: float | None = None) -> None:
        given = [t for t in tensors if t is not None]
        # One sample's worth in all (the median of 65k values is within ~2%): the
        # median of two full samples cost a before | after redraw another ~0.5 ms.
        self._samples = [_magnitudes(t, _SAMPLE // max(1, len(given))) for t in given]
        self._typical: float | None = None
        a = np.concatenate(self._samples) if len(given) > 1 else \
            self._samples[0] if given else np.zeros(0)
        self.decades = 0.0
        if a.size == 0:
            return
        typical = float(np.median(a))
        if len(given) == 1:
            self._typical = typical
        if largest is None:
            largest = max(_largest(t) for t in given)
        if typical > 0:
            self.decades = max(0.0, math.log10(largest / typical))

    @property
    def typical(self) -> float:
        """The first tensor's :func:`typical_magnitude` (1.0 without one)."""
        if self._typical is None:
            first = self._samples[0] if self._samples else np.zeros(0)
            self._typical = float(np.median(first)) if first.size else 1.0
        return self._typical


def largest_finite(*stats) -> float | None:
    """The largest finite |value| that statistics (``TensorStats``) say their
    tensors hold, or ``None`` when one of them cannot say (missing, or no
    finite value): then the tensors themselves are read."""
    out = 0.0
    for s in stats:
        if s is None or not (math.isfinite(s.min) and math.isfinite(s.max)):
            return None
        out = max(out, abs(s.min), abs(s.max))
    return out


def wants_log(decades: float) -> bool:
    """Whether a view defaults to a log scale for values spanning ``decades``."""
    return decades > LOG_DECADES


def signed_log(x: np.ndarray, scale: float) -> np.ndarray:
    """``sign(x) · log10(1 + |x| / scale)``: odd, monotonic, 0 at 0; NaN stays NaN."""
    x = np.asarray(x, dtype=np.float64)
    return np.sign(x) * np.log10(1.0 + np.abs(x) / scale)


def signed_exp(y: np.ndarray | float, scale: float) -> np.ndarray:
    """The inverse of :func:`signed_log`."""
    y = np.asarray(y, dtype=np.float64)
    return np.sign(y) * scale * (np.power(10.0, np.abs(y)) - 1.0)


def log_ticks(lo: float, hi: float, scale: float, per_side: int = 8) -> list[tuple[float, str]]:
    """Ticks for an axis in :func:`signed_log` units spanning real values
    ``[lo, hi]``: 0 and ±10^k at the transformed positions, labelled with the
    real values; from the largest down, a tick closer than 1/``per_side`` of the
    axis' half-span to the one kept before it is left out (no crowding near 0)."""
    out: list[tuple[float, str]] = []
    span = float(signed_log(np.array(max(abs(lo), abs(hi), scale)), scale))
    gap = span / per_side
    if lo <= 0 <= hi:
        out.append((0.0, "0"))
    for sign, end in ((1.0, hi), (-1.0, -lo)):
        if end <= 0:
            continue
        k0 = math.floor(math.log10(scale))
        k1 = math.floor(math.log10(end))
        last = math.inf
        for k in range(k1, k0 - 1, -1):
            v = sign * 10.0 ** k
            pos = float(signed_log(np.array(v), scale))
            if abs(last - abs(pos)) >= gap and abs(pos) >= gap:
                out.append((pos, _short(v)))
                last = abs(pos)
    return sorted(out)


def _short(v: float) -> str:
    """A power of ten as people write it: 0.01, 1, 1000, 1e+06."""
    a = abs(v)
    return f"{v:g}" if 1e-3 <= a < 1e5 else f"{'-' if v < 0 else ''}1e{round(math.log10(a)):d}"


def log_histogram(values: list[torch.Tensor], scale: float,
                  bins: int = 80) -> tuple[np.ndarray, list[np.ndarray]]:
    """Shared bin edges in :func:`signed_log` units over every tensor of
    ``values``, and each one's counts (finite values only; a tensor of more than
    a million values is counted from a strided sample, scaled up)."""
    arrays = []
    for t in values:
        v = torch.as_tensor(t).detach().reshape(-1)
        n = v.numel()
        step = max(1, math.ceil(n / _SAMPLE))
        a = v[::step].float().cpu().numpy()
        a = a[np.isfinite(a)]
        arrays.append((signed_log(a, scale), step))
    finite = [a for a, _ in arrays if a.size]
    if not finite:
        return np.linspace(-1.0, 1.0, bins + 1), [np.zeros(bins) for _ in arrays]
    lo = min(float(a.min()) for a in finite)
    hi = max(float(a.max()) for a in finite)
    if hi - lo < 1e-9:
        lo, hi = lo - 0.5, hi + 0.5
    edges = np.linspace(lo, hi, bins + 1)
    counts = [np.histogram(a, bins=edges)[0].astype(float) * step for a, step in arrays]
    return edges, counts


def log_counts(counts: np.ndarray) -> np.ndarray:
    """Counts drawn on a log axis: ``log10(1 + count)`` (an empty bin stays at 0)."""
    return np.log10(1.0 + np.asarray(counts, dtype=float))


def count_ticks(top: float) -> list[tuple[float, str]]:
    """Ticks 1, 10, 100, ... for a :func:`log_counts` axis up to ``top`` counts."""
    out = [(0.0, "0")]
    k = 0
    while 10.0 ** k <= max(top, 1.0):
        out.append((math.log10(1.0 + 10.0 ** k), _short(10.0 ** k)))
        k += 1
    return out
