"""What runs learn about a model lives in one object per model (ModelMemory), and the
speed-ups switch off by HOOKSCOPE_FAST=0 between runs with the same results."""

from __future__ import annotations

import torch
from torch import nn

from hookscope.core import LoadedModel, ModelMemory, Plan, compare, run
from hookscope.core.engine import fast_slot
from hookscope.core.model.learned import memory_for

from tests.support.hand_hooks import hooked_outputs


class InPlace(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.relu = nn.ReLU(inplace=True)
        self.lin2 = nn.Linear(4, 4)

    def forward(self, x):
        return self.lin2(self.relu(self.lin(x)))  # relu overwrites lin's output


def fresh(seed: int = 3) -> InPlace:
    torch.manual_seed(seed)
    return InPlace().eval()


X = torch.randn(5, 4)


def test_two_models_do_not_share_what_was_learned():
    a, b = fresh(), fresh()
    mem_a, mem_b = ModelMemory(), ModelMemory()
    r = run(a, X, Plan(capture=["lin", "lin2"]), memory=mem_a)
    assert mem_a.victims == {"lin"}
    assert torch.equal(r.captures["lin"][0].tensor, hooked_outputs(a, X, ["lin"])["lin"])
    assert mem_b.victims == set() and memory_for(b).victims == set()
    # Nor does a module's default memory leak to another module.
    run(b, X, Plan(capture=["lin"]))
    assert memory_for(b).victims == {"lin"} and memory_for(a).victims == set()


def test_a_reset_memory_learns_again():
    m, mem = fresh(), ModelMemory()
    first = run(m, X, Plan(capture=["lin"]), memory=mem)
    again = run(m, X, Plan(capture=["lin"]), memory=mem)
    assert again.recaptured == () and again.captures["lin"][0].copied
    mem.reset()
    assert mem == ModelMemory()
    relearned = run(m, X, Plan(capture=["lin"]), memory=mem)
    if fast_slot.active() is None:  # the reference path learns by a second forward
        assert first.recaptured == relearned.recaptured == ("lin",)
    assert mem.victims == {"lin"}
    assert torch.equal(relearned.captures["lin"][0].tensor, first.captures["lin"][0].tensor)


def test_a_loaded_model_holds_the_memory_its_runs_use():
    m = fresh()
    lm = LoadedModel(m, X, "test", "module")
    assert lm.memory is memory_for(m)  # a script's compare(lm.module, ...) shares it
    compare(m, X, Plan(capture=["lin"], clamp={"lin2": (-0.1, 0.1)}))
    assert lm.memory.victims == {"lin"}
    own = ModelMemory()
    assert LoadedModel(m, X, "test", "module", memory=own).memory is own


def test_needs_grad_is_learned_per_model():
    class Differentiates(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(3, 1)

        def forward(self, x):
            x = x.clone().requires_grad_()
            (g,) = torch.autograd.grad(self.lin(x).sum(), x)
            return g

    m, mem = Differentiates(), ModelMemory()
    r = run(m, torch.ones(2, 3), Plan(capture=["lin"]), memory=mem)
    assert mem.needs_grad and not memory_for(m).needs_grad
    assert torch.equal(r.output, m.lin.weight.detach().expand(2, 3))


def test_switching_the_speed_ups_off_between_runs_gives_the_same_results(monkeypatch):
    m = fresh()
    plans = [Plan(capture=["lin", "relu", "lin2"]), Plan(capture=["lin", "lin2"], keep_tensors=False),
             Plan(capture=["lin", "lin2"], clamp={"relu": (0.0, 0.2)})]
    on = [compare(m, X, p, memory=ModelMemory()) for p in plans]
    monkeypatch.setenv("HOOKSCOPE_FAST", "0")
    assert fast_slot.active() is None and fast_slot.kernel() is None
    off = [compare(m, X, p, memory=ModelMemory()) for p in plans]
    for a, b in zip(on, off):
        assert torch.equal(a.output_with, b.output_with)
        assert a.captures.keys() == b.captures.keys()
        for path in a.captures:
            for ra, rb in zip(a.captures[path], b.captures[path]):
                assert (ra.tensor is None) == (rb.tensor is None)
                if ra.tensor is not None:
                    assert torch.equal(ra.tensor, rb.tensor), path
                sa, sb = ra.stats, rb.stats
                assert (sa.min, sa.max, sa.nan_count) == (sb.min, sb.max, sb.nan_count), path
                assert abs(sa.mean - sb.mean) <= 1e-6 and abs(sa.std - sb.std) <= 1e-6, path
                assert sa.fraction_changed == sb.fraction_changed
                assert (sa.hist_counts == sb.hist_counts).all(), path
