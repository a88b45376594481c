"""A short soak of the core: hundreds of comparisons alternating good and failing runs.

Every run, good or failed, must leave no hook behind and keep the user's own
hook; memory must stay flat (tracemalloc over Python allocations, which is
where leaked records, closures or tracebacks would accumulate).
"""

from __future__ import annotations

import gc
import tracemalloc

import pytest
import torch
from torch import nn

from hookscope.core import ForwardError, HookscopeError, Plan, compare

ROUNDS = 300


class Flaky(nn.Module):
    """Fails on every input whose first value is negative."""

    def __init__(self):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(8, 8), nn.Linear(8, 4)

    def forward(self, x):
        h = self.fc1(x).relu()
        if x[0, 0] < 0:
            raise RuntimeError("negative input")
        return self.fc2(h)


def test_alternating_good_and_failing_runs_leak_nothing():
    torch.manual_seed(0)
    model = Flaky().eval()
    user_calls = []
    model.fc1.register_forward_hook(lambda m, i, o: user_calls.append(1))
    good, bad = torch.ones(1, 8), -torch.ones(1, 8)
    plan = Plan(capture=("fc1", "fc2"), clamp={"fc1": (-0.1, 0.1)})

    def one(i: int) -> None:
        x = bad if i % 2 else good
        try:
            r = compare(model, x, plan, "cpu")
        except ForwardError:
            assert i % 2
        else:
            assert not i % 2 and r.outputs_differ in (True, False)
        assert len(model.fc1._forward_hooks) == 1 and len(model.fc2._forward_hooks) == 0

    for i in range(20):  # warm up caches (torch dispatch, stats kernels)
        one(i)
    gc.collect()
    tracemalloc.start()
    start, _ = tracemalloc.get_traced_memory()
    for i in range(ROUNDS):
        one(i)
    gc.collect()
    end, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert end - start < 256 * 1024, f"grew {(end - start) / 1024:.0f} KiB over {ROUNDS} runs"
    assert len(user_calls) > ROUNDS  # the user's hook ran on every forward, still attached


@pytest.mark.parametrize("bad_plan", [lambda: Plan(capture=("nope",)),
                                      lambda: Plan(clamp={"fc1": (1.0, -1.0)})])
def test_a_rejected_plan_attaches_nothing(bad_plan):
    model = Flaky()
    with pytest.raises(HookscopeError):
        compare(model, torch.ones(1, 8), bad_plan(), "cpu")
    assert all(not m._forward_hooks and not m._forward_pre_hooks for m in model.modules())
