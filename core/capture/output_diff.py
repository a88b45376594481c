"""Whether two outputs differ, and by how much, in few passes over the values.

A comparison's outputs can be large (GPT-2's logits: 128 × 50257 values), and
the difference is computed on every Live update. Converting both to float64
and masking NaNs cost about ten passes over 50 MB, more than a fifth of two
GPT-2 forwards. Here a float tensor pair costs ``torch.equal`` (one pass) when
equal, else one subtraction in its own dtype, ``abs_`` and ``max``. The answer
stays exact: rounding is monotonic, so the largest rounded ``|a - b|`` marks the
elements whose exact (float64) difference is largest, and only those are
recomputed exactly. Anything unusual (NaN, Inf, integer or complex values)
takes the exact float64 path.
"""

from __future__ import annotations

from typing import Any

import torch

from ..base.nested import tensor_leaves
from ..views.display import flat_array  # noqa: F401 - capture's face exports it from here


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


def _fast(ta: torch.Tensor, tb: torch.Tensor) -> tuple[bool, float] | None:
    """Few-pass answer for finite real floats of one dtype; None where it cannot say."""
    if (ta.dtype != tb.dtype or not ta.is_floating_point() or ta.device != tb.device
            or ta.numel() == 0):
        return None
    d = torch.sub(ta, tb).abs_()
    top = d.max()
    worst = float(top)
    if worst != worst or worst == float("inf"):  # NaN or Inf somewhere: exact path
        return None
    if worst == 0.0:  # a - b rounds to 0 only when a == b (finite, no flush-to-zero)
        return False, 0.0
    at = d == top  # the elements with the largest rounded difference
    exact = (ta[at].double() - tb[at].double()).abs().max()
    return True, float(exact)


def output_difference(a: Any, b: Any) -> tuple[bool, float]:
    """Whether two (nested) outputs differ anywhere, and the largest |a - b|.

    NaN in the same place in both counts as equal, and so does the same infinity.
    """
    la, lb = tensor_leaves(a), tensor_leaves(b)
    if [k for k, _ in la] != [k for k, _ in lb]:
        return True, float("inf")
    differ = False
    worst = 0.0
    for (_, ta), (_, tb) in zip(la, lb):
        if ta.shape != tb.shape:
            return True, float("inf")
        if torch.equal(ta, tb):
            continue
        got = _fast(ta, tb)
        d, w = got if got is not None else _exact(ta, tb)
        differ = differ or d
        worst = max(worst, w)
    return differ, worst


def flat_floats(value: Any) -> list[float]:
    """Every tensor leaf of ``value`` flattened into one list of Python floats (for JSON)."""
    return flat_array(value).tolist()
