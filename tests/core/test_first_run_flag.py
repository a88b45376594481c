"""A comparison whose baseline is the model's first forward on inputs of that shape says so
(``RunResult.first_run``): that forward carries one-time set-up, so its time is no measure
of the model. A second run on the same shape, a reused baseline, or a run after the tree
was observed (a forward on the same input) is not flagged; a new shape or dtype is."""

from __future__ import annotations

import torch
from torch import nn

from hookscope.core import Plan, compare
from hookscope.core import observe
from hookscope.core.model import memory_for


def model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))


def test_the_first_forward_on_a_shape_is_flagged_once():
    m = model()
    plan = Plan(clamp={"0": (-0.1, 0.1)})
    x = torch.randn(1, 4)
    first = compare(m, x, plan)
    assert first.first_run and first.to_json_dict()["timings_ms"]["first_run"] is True
    again = compare(m, torch.randn(1, 4), plan)            # same shape, other values
    assert not again.first_run and again.to_json_dict()["timings_ms"]["first_run"] is False
    assert compare(m, torch.randn(3, 4), plan).first_run   # another batch size
    assert compare(m.double(), torch.randn(3, 4, dtype=torch.float64), plan).first_run
    assert not compare(m, torch.randn(3, 4, dtype=torch.float64), plan).first_run
    # the numbers are the same either way: the flag only labels the timing
    assert torch.equal(compare(model(), x, plan).output_with, first.output_with)


def test_a_reused_baseline_and_an_observed_input_are_not_first_runs():
    m = model()
    x = torch.randn(2, 4)
    observe(m, x)     # the session's first run observes the tree: a forward on this input
    r = compare(m, x, Plan(clamp={"0": (-0.1, 0.1)}))
    assert not r.first_run
    r2 = compare(m, torch.randn(5, 4), Plan(clamp={"0": (-0.2, 0.2)}))
    assert r2.first_run
    r3 = compare(m, torch.randn(5, 4), Plan(clamp={"0": (-0.3, 0.3)}), baseline=r2.baseline)
    assert r3.baseline_reused and not r3.first_run
    memory_for(m).reset()   # forgotten: the next forward is a first one again
    assert compare(m, x, Plan()).first_run
