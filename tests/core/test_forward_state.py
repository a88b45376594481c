"""Both forwards of a comparison start from the same RNG state and buffers."""

import pytest
import torch
from torch import nn

from hookscope.core import Plan, compare
from hookscope.core.engine.forward_state import restore, snapshot


class RandomNet(nn.Module):
    """Adds torch.rand noise in forward (eval mode does not stop it)."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        return self.fc(x) + torch.rand(x.shape[0], 4)


class CounterNet(nn.Module):
    """A step counter buffer, replaced (not changed in place) on every call."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.register_buffer("count", torch.zeros(()))

    def forward(self, x):
        self.count = self.count + 1
        return self.fc(x) * self.count


def dropout_net():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 8), nn.Dropout(0.5), nn.Linear(8, 4)).train()


def bn_net():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.Linear(8, 4)).train()


def random_net():
    torch.manual_seed(0)
    return RandomNet().eval()


def counter_net():
    torch.manual_seed(0)
    return CounterNet().eval()


MODELS = {"dropout": (dropout_net, "0"), "batchnorm-train": (bn_net, "0"),
          "torch.rand": (random_net, "fc"), "counter": (counter_net, "fc")}


@pytest.mark.parametrize("name", list(MODELS))
def test_empty_plan_shows_no_difference(name):
    make, _ = MODELS[name]
    model = make()
    x = torch.randn(3, 4, generator=torch.Generator().manual_seed(1))
    r = compare(model, x, Plan())
    assert not r.outputs_differ and r.max_abs_diff == 0.0
    # a capture-only plan too: hooks never change the random numbers drawn
    r2 = compare(model, x, Plan(capture=[MODELS[name][1]]))
    assert not r2.outputs_differ


@pytest.mark.parametrize("name", list(MODELS))
def test_clamp_still_differs_and_matches_a_hand_written_hook(name):
    make, layer = MODELS[name]
    model = make()
    x = torch.randn(3, 4, generator=torch.Generator().manual_seed(1))
    state = snapshot(model)
    r = compare(model, x, Plan(clamp={layer: (-0.05, 0.05)}))
    assert r.outputs_differ
    # by hand, from the same start: the clamp hook alone makes the difference
    restore(model, state)
    h = model.get_submodule(layer).register_forward_hook(lambda m, i, o: o.clamp(-0.05, 0.05))
    try:
        with torch.no_grad():
            want = model(x.clone())
    finally:
        h.remove()
    assert torch.equal(r.output_with, want)
    restore(model, state)
    with torch.no_grad():
        assert torch.equal(r.output_without, model(x.clone()))


def test_comparison_leaves_buffers_and_rng_as_found():
    model = bn_net()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    x = torch.randn(5, 4)
    rng = torch.get_rng_state()
    compare(model, x, Plan(clamp={"0": (-0.1, 0.1)}))
    after = model.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)
    assert torch.equal(torch.get_rng_state(), rng)
    counter = counter_net()
    buf = counter.count
    compare(counter, torch.randn(2, 4), Plan())
    assert counter.count is buf and float(counter.count) == 0.0


def test_observing_the_tree_leaves_buffers_and_rng_as_found():
    from hookscope.core import observe

    model = bn_net()
    x = torch.randn(5, 4)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    rng = torch.get_rng_state()
    tree = observe(model, x)
    assert tree.find("1").output_shape == (5, 8)
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    assert torch.equal(torch.get_rng_state(), rng)


def test_restore_puts_back_every_kind_of_buffer():
    m = nn.Module()
    m.register_buffer("f32", torch.arange(5.0))
    m.register_buffer("i64", torch.tensor(7))
    m.register_buffer("flags", torch.tensor([True, False]))
    with torch.inference_mode():
        m.register_buffer("made_in_inference", torch.ones(3))
    m.child = nn.BatchNorm1d(3).train()
    before = {k: v.clone() for k, v in m.state_dict().items()}
    replaced_obj = m.i64
    state = snapshot(m)
    m.child(torch.randn(6, 3))  # running statistics change in place, no version bump
    m.f32.mul_(-2)
    m.flags.logical_not_()
    m.i64 = m.i64 + 1  # replaced, not changed in place
    with torch.inference_mode():
        m.made_in_inference.zero_()
    restore(m, state)
    after = m.state_dict()
    assert after.keys() == before.keys()
    for k, v in before.items():
        assert after[k].dtype == v.dtype and torch.equal(after[k], v), k
    assert m.i64 is replaced_obj  # the original object is back, not a copy


class OwnStepNorm(nn.BatchNorm1d):
    """A BatchNorm subclass whose own forward counts its calls, in eval mode too."""

    def forward(self, x):
        self.num_batches_tracked += 1
        return super().forward(x)


def test_eval_mode_norm_layers_are_not_copied_but_others_are():
    # Eval-mode BatchNorm/InstanceNorm only read their running statistics, so a
    # snapshot skips them; train mode and a subclass's own forward are still recorded.
    model = nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.InstanceNorm1d(8, track_running_stats=True),
                          OwnStepNorm(8)).eval()
    recorded = {(type(owner).__name__, name) for owner, name, _, _ in snapshot(model).buffers}
    assert ("BatchNorm1d", "running_mean") not in recorded
    assert ("InstanceNorm1d", "running_mean") not in recorded
    assert ("OwnStepNorm", "num_batches_tracked") in recorded
    model.train()
    assert ("BatchNorm1d", "running_mean") in {(type(o).__name__, n) for o, n, _, _ in snapshot(model).buffers}


def test_a_clamped_comparison_in_eval_mode_leaves_every_buffer_as_found():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.ReLU(), OwnStepNorm(8)).eval()
    model[1].running_mean.normal_()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    r = compare(model, torch.randn(5, 4), Plan(capture=["1"], clamp={"1": (-0.1, 0.1)}))
    assert r.outputs_differ
    after = model.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)


def test_a_model_with_an_uninitialised_lazy_layer_can_be_compared():
    # Its buffers hold no values before the first forward: nothing to copy (copying
    # one raised), and the comparison still starts both forwards from the same state.
    torch.manual_seed(0)
    model = nn.Sequential(nn.LazyLinear(8), nn.LazyBatchNorm1d(), nn.Linear(8, 2)).train()
    x = torch.randn(5, 4)
    r = compare(model, x, Plan())
    assert not r.outputs_differ
    r = compare(model, x, Plan(clamp={"1": (-0.1, 0.1)}))
    assert r.outputs_differ
    assert model[1].running_mean.shape == (8,)
