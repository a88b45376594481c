"""The two bounds of an intervention as lines on a histogram, and what dragging one writes.

A kind draws bound lines when it says where they are (:meth:`Intervention.bounds`
is overridden) and drags exactly two parameters (:attr:`Intervention.draggable`):
the low bound first, the high one second (clamp: ``lo``, ``hi``). No kind is named
here, so a new kind with two bounds gets lines and drags without a change to the
widgets.
"""

from __future__ import annotations

import math

from .intervention_base import Intervention
from .interventions import Clamp
from .plan import Plan


def bound_params(iv: Intervention | type[Intervention] | None) -> tuple[str, str] | None:
    """The (low, high) parameter names a histogram's bound lines drag, or ``None``."""
    if iv is None:
        return None
    cls = iv if isinstance(iv, type) else type(iv)
    if cls.bounds is Intervention.bounds or len(cls.draggable) != 2:
        return None
    return cls.draggable[0], cls.draggable[1]


def plan_bounds(plan: Plan, path: str) -> tuple[float, float] | None:
    """``(lo, hi)`` of ``path``'s bounded intervention in ``plan`` (open ends ``±inf``),
    ``None`` when the layer has none."""
    iv = plan.intervention_for(path)
    if bound_params(iv) is None:
        return None
    assert iv is not None  # bound_params(None) is None
    got = iv.bounds()
    return None if got is None else (float(got[0]), float(got[1]))


def dragged(iv: Intervention | None, high: bool, value: float) -> Intervention:
    """``iv`` with its low (or ``high``) bound moved to ``value``, kept on its side of
    the other bound; everything else about ``iv`` (its other parameters, ``at``)
    stays. A layer without a bounded intervention gets a clamp open at the other end."""
    names = bound_params(iv)
    if names is None or iv is None:
        return Clamp(-math.inf, value) if high else Clamp(value, math.inf)
    lo, hi = iv.bounds() or (-math.inf, math.inf)
    if high:
        return iv.with_value(names[1], max(value, lo))
    return iv.with_value(names[0], min(value, hi))
