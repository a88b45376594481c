"""Whether two outputs differ, by how much, and their relative change, in few
passes over the values.

A comparison's outputs can be large (GPT-2's logits: 128 × 50257 values), and
the difference is computed on every Live update. Converting both to float64
and masking NaNs cost about ten passes over 50 MB, more than a fifth of two
GPT-2 forwards. Here a float tensor pair costs ``torch.equal`` (one pass, which
stops at the first difference) when equal, else one subtraction in its own
dtype, ``abs_`` and the largest value of each block of :data:`BLOCK` values;
the relative change reads that difference and the baseline once more each.

The largest difference stays exact (float64): rounding is monotonic, so the
largest rounded ``|a - b|`` marks the elements whose exact difference is
largest, and only the blocks holding it are recomputed in float64 (a mask
over every element cost about as much as the rest together). Anything unusual
(NaN, Inf, integer or complex values, mixed dtypes) takes the exact float64
path.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from ..base.nested import tensor_leaves
from ..views.display import flat_array  # noqa: F401 - capture's face exports it from here

#: Values per block whose largest difference is kept; the blocks holding the
#: largest one are recomputed in float64.
BLOCK = 4096
#: More tied blocks than this (e.g. a constant added everywhere): one mask instead.
_TIED_BLOCKS = 64


def _exact(ta: torch.Tensor, tb: torch.Tensor) -> tuple[bool, float]:
    """The reference computation: float64, NaN in the same place counts as equal."""
    da, db = ta.double(), tb.double()
    # equal values (inf == inf included: inf - inf is NaN) and NaN beside NaN are the same
    same = (da == db) | (torch.isnan(da) & torch.isnan(db))
    d = (da - db).abs().masked_fill(same, 0.0)
    if not bool((d != 0).any()):
        return False, 0.0
    d = d.nan_to_num(nan=float("inf"), posinf=float("inf"))  # keep inf as inf
    return True, float(d.max())


def _exact_largest(ta: torch.Tensor, tb: torch.Tensor, d: torch.Tensor) -> float:
    """The float64 ``|a - b|`` largest among the elements whose rounded ``d`` is largest."""
    flat = d.reshape(-1)
    n = flat.numel()
    whole = n - n % BLOCK
    parts = [flat[:whole].view(-1, BLOCK).amax(1)] if whole else []
    if whole < n:
        parts.append(flat[whole:].amax().reshape(1))
    block_top = torch.cat(parts) if len(parts) > 1 else parts[0]
    top = block_top.max()
    a, b = ta.reshape(-1), tb.reshape(-1)
    blocks = (block_top == top).nonzero().flatten().tolist()
    if len(blocks) > _TIED_BLOCKS:
        at = flat == top
        return float((a[at].double() - b[at].double()).abs().max())
    return max(float((a[i * BLOCK:(i + 1) * BLOCK].double()
                      - b[i * BLOCK:(i + 1) * BLOCK].double()).abs().max()) for i in blocks)


def _fast(ta: torch.Tensor, tb: torch.Tensor,
          norms: bool) -> tuple[bool, float, float, float] | None:
    """Few-pass ``(differ, largest |a - b|, ||a - b||², ||a||²)`` for finite real floats of
    one dtype (the norms 0 unless asked); ``None`` where it cannot say."""
    if (ta.dtype != tb.dtype or not ta.is_floating_point() or ta.device != tb.device
            or ta.numel() == 0):
        return None
    d = torch.sub(ta, tb).abs_()
    worst = float(d.max())
    if worst != worst or worst == float("inf"):  # NaN or Inf somewhere: exact path
        return None
    if worst == 0.0:  # a - b rounds to 0 only when a == b (finite, no flush-to-zero)
        return False, 0.0, 0.0, 0.0
    dsq = asq = 0.0
    if norms:
        dn, an = float(torch.linalg.vector_norm(d)), float(torch.linalg.vector_norm(ta))
        if not (math.isfinite(dn) and math.isfinite(an)):   # overflow: the float64 sums
            return None
        dsq, asq = dn * dn, an * an
    return True, _exact_largest(ta, tb, d), dsq, asq


def _sq64(t: torch.Tensor) -> float:
    """``||t||²`` in float64, NaN counted as 0 (the reference sum)."""
    return float(t.double().nan_to_num(nan=0.0).square().sum())


def _squares64(ta: torch.Tensor, tb: torch.Tensor) -> tuple[float, float]:
    """``(||b - a||², ||a||²)`` by the reference sums."""
    return _sq64(tb.double() - ta.double()), _sq64(ta)


def _norm_sq(t: torch.Tensor) -> float:
    """``||t||²`` (NaN counted as 0), in ``t``'s dtype where that stays finite."""
    n = float(torch.linalg.vector_norm(t))
    return n * n if math.isfinite(n) else _sq64(t)


def _ratio(num: float, den: float) -> float:
    """``sqrt(num / den)``: 0 when nothing changed, ``inf`` when the base is all zeros."""
    if num == 0:
        return 0.0
    return math.sqrt(num / den) if den > 0 else math.inf


def output_change(a: Any, b: Any, relative: bool = True) -> tuple[bool, float, float]:
    """``(differ, largest |a - b|, ||b - a|| / ||a||)`` of two (nested) outputs.

    NaN in the same place in both counts as equal, and so does the same
    infinity. The relative change is over the floating leaves both share (0 when
    they do not differ; ``inf`` when ``a`` is all zeros and they do), and is not
    computed when ``relative`` is false (0).
    """
    la, lb = tensor_leaves(a), tensor_leaves(b)
    if [k for k, _ in la] != [k for k, _ in lb]:
        return True, float("inf"), _relative(a, b) if relative else 0.0
    differ = False
    worst = num = den = 0.0
    for (_, ta), (_, tb) in zip(la, lb):
        if ta.shape != tb.shape:
            return True, float("inf"), _relative(a, b) if relative else 0.0
        floating = relative and ta.is_floating_point()
        if torch.equal(ta, tb):
            if floating:
                den += _norm_sq(ta)
            continue
        got = _fast(ta, tb, floating)
        if got is not None:
            d, w, dsq, asq = got
        else:
            d, w = _exact(ta, tb)
            dsq, asq = _squares64(ta, tb) if floating else (0.0, 0.0)
        differ = differ or d
        worst = max(worst, w)
        num, den = num + dsq, den + asq
    return differ, worst, _ratio(num, den) if differ else 0.0


def _relative(a: Any, b: Any) -> float:
    """The relative change over the leaves two differently shaped outputs share."""
    num = den = 0.0
    b_by = dict(tensor_leaves(b))
    for key, ta in tensor_leaves(a):
        tb = b_by.get(key)
        if tb is None or tb.shape != ta.shape or not ta.is_floating_point():
            continue
        dsq, asq = _squares64(ta, tb)
        num, den = num + dsq, den + asq
    return _ratio(num, den)


def output_difference(a: Any, b: Any) -> tuple[bool, float]:
    """Whether two (nested) outputs differ anywhere, and the largest |a - b|.

    NaN in the same place in both counts as equal, and so does the same infinity.
    """
    differ, worst, _rel = output_change(a, b, relative=False)
    return differ, worst


def flat_floats(value: Any) -> list[float]:
    """Every tensor leaf of ``value`` flattened into one list of Python floats (for JSON)."""
    return flat_array(value).tolist()
