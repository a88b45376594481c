"""In-place victims are found and copied in the first forward, not by a second one."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from hookscope.core import ModelMemory, Plan, run
from hookscope.core.fast.inplace_guard import InplaceGuard

from tests.support.hand_hooks import hooked_outputs

from fast_marks import fast_only  # tests/core is on sys.path

pytestmark = fast_only


class InPlace(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.bn = nn.BatchNorm1d(4)
        self.relu = nn.ReLU(inplace=True)
        self.lin2 = nn.Linear(4, 4)
        self.lin3 = nn.Linear(4, 4)

    def forward(self, x):
        y = self.relu(self.bn(self.lin(x)))   # relu overwrites bn's output
        z = self.lin2(y)
        z += 1.0                              # overwrites lin2's output
        w = self.lin3(z)
        w.data.mul_(2.0)                      # through .data: no version bump
        return w


def fresh():
    torch.manual_seed(3)
    return InPlace().eval()


@pytest.fixture
def guard_every_model(monkeypatch):
    """The guard as a big model gets it (small ones fall back to version counters)."""
    import hookscope.core.fast.inplace_guard as iv

    monkeypatch.setattr(iv, "GUARD_FROM_PARAMS", 0)


def test_first_run_copies_only_the_victims_in_one_forward(guard_every_model):
    m = fresh()
    x = torch.randn(5, 4)
    paths = ["lin", "bn", "relu", "lin2", "lin3"]
    ref = hooked_outputs(m, x, paths)
    assert not torch.equal(ref["bn"], ref["bn"].clamp_min(0))  # relu really changes bn's values
    forwards = []
    m.register_forward_pre_hook(lambda mod, args: forwards.append(1))
    for attempt in range(2):
        r = run(m, x, Plan(capture=paths))
        assert len(forwards) == attempt + 1  # never a second forward
        assert r.recaptured == ()
        for p in paths:
            assert torch.equal(r.captures[p][0].tensor, ref[p]), (attempt, p)
        copied = {p for p in paths if r.captures[p][0].copied}
        assert copied == {"bn", "lin2", "lin3"}, attempt


def test_a_newly_captured_layer_is_watched_on_its_first_run(guard_every_model):
    m = fresh()
    x = torch.randn(5, 4)
    ref = hooked_outputs(m, x, ["lin", "lin2"])
    r = run(m, x, Plan(capture=["lin"]))
    assert not any(rec.copied for rec in r.captures["lin"])
    r = run(m, x, Plan(capture=["lin", "lin2"]))  # lin2 is new: watched in this forward
    assert r.recaptured == ()
    assert r.captures["lin2"][0].copied and torch.equal(r.captures["lin2"][0].tensor, ref["lin2"])


def test_guard_copies_before_the_write_and_only_watched_memory():
    guard = InplaceGuard()

    class Rec:
        path = "a"
        copied = False
        remake = None  # not a capture that can be computed again (core/fast/victim_remake.py)

    rec = Rec()
    t = torch.arange(6.0)
    other = torch.zeros(3)
    rec.kept = (t, t._version)
    guard.watch(rec, "kept")
    with guard:
        other.add_(1.0)              # other memory: nothing copied
        assert rec.kept[0] is t
        t[2:4].mul_(10.0)            # a view of the watched memory
    assert rec.copied and guard.victims == {"a"}
    assert torch.equal(rec.kept[0], torch.arange(6.0))
    assert t[2] == 20.0


def test_a_small_model_learns_without_the_guard_and_stays_correct(monkeypatch):
    """Below GUARD_FROM_PARAMS (and with torch._dynamo not yet imported) the first run
    finds its victims by version counter: a second forward, the same right values."""
    import sys

    import hookscope.core.fast.inplace_guard as iv

    monkeypatch.delitem(sys.modules, "torch._dynamo", raising=False)
    m = nn.Sequential(nn.Linear(3, 3), nn.ReLU(inplace=True))
    assert not iv.worth_guarding(m, ModelMemory())
    x = torch.randn(4, 3)
    res = run(m, x, Plan(capture=["0"]))
    with torch.no_grad():
        want = m[0](x)
    assert torch.equal(res.captures["0"][0].tensor, want)  # not the ReLU'd values
    assert res.recaptured == ("0",)


@pytest.mark.parametrize("compared", [False, True])
def test_a_dropped_result_frees_its_captures_without_the_cycle_collector(guard_every_model, compared):
    # The hooks pointed back at their session (and the guard at the captures it
    # watched): dropped results stayed in memory until the cycle collector ran, on
    # ResNet-50 at batch 8 a first run's 0.7 GiB.
    import gc
    import weakref

    from hookscope.core import compare

    model = fresh()
    plan = Plan(capture=["lin", "bn", "relu", "lin2", "lin3"])
    x = torch.randn(3, 4)
    gc.collect()
    was_enabled = gc.isenabled()   # the test run keeps it off (tests/conftest.py): leave it so
    gc.disable()
    try:
        for _ in range(2):  # the first run (guarded, copies the victims), then a steady one
            r = compare(model, x, plan) if compared else run(model, x, plan)
            refs = [weakref.ref(rec.tensor) for recs in r.captures.values() for rec in recs]
            assert len(refs) == 5 and all(ref() is not None for ref in refs)
            del r
            assert [ref() for ref in refs] == [None] * 5
    finally:
        if was_enabled:
            gc.enable()


def conv_block():
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU(inplace=True),
                         nn.MaxPool2d(2)).eval()


def test_first_run_copies_what_relu_overwrites_in_a_conv_block(guard_every_model):
    m, x = conv_block(), torch.randn(2, 3, 10, 10)
    paths = ["0", "1", "2", "3"]
    ref = hooked_outputs(m, x, paths)
    r = run(m, x, Plan(capture=paths))
    assert r.recaptured == ()  # learned in the same forward, not by a second one
    for p in paths:
        assert torch.equal(r.captures[p][0].tensor, ref[p]), p
    assert (r.captures["1"][0].tensor < 0).any()  # bn's values from before the ReLU
    assert torch._C._len_torch_dispatch_stack() == 0


def test_a_model_error_under_the_guard_is_still_a_forward_error(guard_every_model):
    from hookscope.core import ForwardError

    m = nn.Sequential(nn.Linear(3, 3), nn.ReLU(inplace=True))
    with pytest.raises(ForwardError, match="shape"):
        run(m, torch.randn(2, 5), Plan(capture=["0", "1"]))
    assert torch._C._len_torch_dispatch_stack() == 0
    assert all(not mod._forward_hooks and not mod._forward_pre_hooks for mod in m.modules())
