"""Which interventions a histogram's two bound lines show and drag (core.plan's
bound_params), found from the kind's own declarations, and what a drag writes."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import torch

from hookscope.core import At, Clamp, Intervention, Plan, Scale, param
from hookscope.core.plan import bound_params, dragged, plan_bounds


@dataclass(frozen=True)
class Band(Intervention):
    """A kind of its own with two bounds: zero what lies outside ``[floor, ceiling]``."""

    floor: float = param("float", -1.0)
    ceiling: float = param("float", 1.0)
    name: ClassVar[str] = "test-band"
    draggable: ClassVar[tuple[str, ...]] = ("floor", "ceiling")

    def apply_tensor(self, t, ctx):
        return torch.where((t >= self.floor) & (t <= self.ceiling), t, torch.zeros_like(t))

    def bounds(self) -> tuple[float, float]:
        return (self.floor, self.ceiling)


def test_kinds_with_two_bounds_are_found_by_what_they_declare():
    assert bound_params(Clamp) == ("lo", "hi") and bound_params(Clamp(0, 1)) == ("lo", "hi")
    assert bound_params(Band()) == ("floor", "ceiling")
    assert bound_params(Scale(2.0)) is None and bound_params(None) is None
    plan = Plan(interventions={"a": Band(-0.2, 0.4), "b": Scale(2.0), "c": Clamp(None, 0.5)})
    assert plan_bounds(plan, "a") == (-0.2, 0.4)
    assert plan_bounds(plan, "b") is None and plan_bounds(plan, "d") is None
    assert plan_bounds(plan, "c") == (-math.inf, 0.5)


def test_a_drag_moves_one_bound_keeps_the_rest_and_never_crosses_the_other():
    aimed = Clamp(-0.5, 0.5, at=At(positions=(0,)))
    got = dragged(aimed, True, 0.25)
    assert got == Clamp(-0.5, 0.25, at=aimed.at)
    assert dragged(aimed, False, 3.0).bounds() == (0.5, 0.5)     # low stops at high
    assert dragged(Band(-0.2, 0.4), False, -0.1) == Band(-0.1, 0.4)
    # No bounded intervention yet (none, or a kind without bounds): a clamp, open at the other end.
    assert dragged(None, False, -0.3).bounds() == (-0.3, math.inf)
    assert dragged(Scale(2.0), True, 0.7).bounds() == (-math.inf, 0.7)
