"""In-place victims that are eval-mode BatchNorms: their captures are computed again
from the intact input when first read (core/fast/victim_remake.py), bit for bit the
values the forward had, whatever happens to the model after the run."""

from __future__ import annotations

import pickle

import pytest
import torch
from torch import nn

from hookscope.core import Plan, run
from hookscope.core.base.errors import HookscopeError

from tests.support.hand_hooks import hooked_outputs

from fast_marks import fast_only  # tests/core is on sys.path

pytestmark = fast_only


class Block(nn.Module):
    """A torchvision-style residual block: every BatchNorm's output is overwritten in
    place (ReLU(inplace=True), ``out += identity``)."""

    def __init__(self, c=8, affine=True):
        super().__init__()
        self.conv1 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(c, affine=affine)
        self.conv2 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(c, affine=affine)
        self.relu = nn.ReLU(inplace=True)

    def forward(self, x):
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        out += x
        return self.relu(out)


def block(affine=True):
    torch.manual_seed(0)
    m = Block(affine=affine).eval()
    with torch.no_grad():  # statistics far from the identity map, so a wrong one shows
        for bn in (m.bn1, m.bn2):
            bn.running_mean.normal_(0, 0.5)
            bn.running_var.uniform_(0.3, 3.0)
            if affine:
                bn.weight.uniform_(0.5, 2.0)
                bn.bias.normal_(0, 0.5)
    return m


X = torch.randn(2, 8, 6, 6, generator=torch.Generator().manual_seed(1))
LEAVES = ["conv1", "bn1", "conv2", "bn2", "relu"]


def remade(rec) -> bool:
    """Whether a record's tensor waits to be computed (read ``tensor`` to compute it)."""
    return rec._remake is not None


def steady(model, plan):
    run(model, X, plan)  # the first run learns the victims (and copies them)
    return run(model, X, plan)


@pytest.mark.parametrize("affine", [True, False])
def test_batchnorm_victims_are_remade_with_the_forwards_exact_values(affine):
    m = block(affine)
    want = hooked_outputs(m, X, LEAVES)
    res = steady(m, Plan(capture=LEAVES))
    assert res.recaptured == ()
    assert [p for p in LEAVES if remade(res.captures[p][0])] == ["bn1", "bn2"]
    for p in LEAVES:
        rec = res.captures[p][-1]  # the reference keeps a layer's last call (relu runs twice)
        assert rec.copied == (p in ("bn1", "bn2"))
        assert rec.shape == tuple(want[p].shape)  # known without computing it
        assert torch.equal(rec.tensor, want[p]), p
    assert not remade(res.captures["bn1"][0])  # computed once, then kept
    # Without the remake the relu's capture would be bn1's memory: they are distinct.
    assert res.captures["bn1"][0].tensor.min() < 0 <= res.captures["relu"][0].tensor.min()


def test_a_remade_capture_keeps_the_runs_values_after_the_model_changes():
    m = block()
    want = hooked_outputs(m, X, ["bn1", "bn2"])
    plan = Plan(capture=LEAVES)
    res = steady(m, plan)
    again = run(m, X, plan)  # a later run reuses the copied statistics: nothing changed
    with torch.no_grad():  # an optimizer step, and new statistics loaded
        m.bn1.weight.mul_(3.0)
        m.bn2.running_mean.add_(1.0)
        m.load_state_dict({k: v * 0.5 for k, v in m.state_dict().items()
                           if v.is_floating_point()}, strict=False)
    for r in (res, again):
        for p in ("bn1", "bn2"):
            assert torch.equal(r.captures[p][0].tensor, want[p]), p
    # The next run sees the new weights, also where they were written through ``.data``
    # (no version counter sees that, so nothing is carried over from an earlier run).
    for change in (lambda: None, lambda: m.bn1.weight.data.mul_(0.5),
                   lambda: m.bn2.running_var.data.add_(1.0), lambda: setattr(m.bn1, "eps", 0.5)):
        change()
        now = hooked_outputs(m, X, ["bn1", "bn2"])
        later = run(m, X, plan)
        assert all(torch.equal(later.captures[p][0].tensor, now[p]) for p in ("bn1", "bn2"))
    assert not torch.equal(now["bn1"], want["bn1"])


class InputOverwritten(nn.Module):
    """bn's input is itself overwritten after bn ran: its capture cannot be remade."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(8, 8, 1)
        self.bn = nn.BatchNorm2d(8)
        self.relu = nn.ReLU(inplace=True)

    def forward(self, x):
        y = self.conv(x)
        z = self.relu(self.bn(y))
        y.mul_(2.0)
        return z + y


class WeightsTouched(Block):
    """A forward that bumps a BatchNorm's weight version after the layer ran."""

    def forward(self, x):
        out = super().forward(x)
        with torch.no_grad():
            self.bn1.weight.add_(0.0)
        return out


@pytest.fixture(params=["guarded", "by versions"])
def first_run(request, monkeypatch):
    """Both ways a model's first run learns its victims: under the in-place guard (big
    models, or torch._dynamo loaded), where a BatchNorm victim is remade already, and
    by version counters with a second forward (small models)."""
    import sys

    import hookscope.core.fast.inplace_guard as iv

    if request.param == "guarded":
        monkeypatch.setattr(iv, "GUARD_FROM_PARAMS", 0)
    else:
        monkeypatch.delitem(sys.modules, "torch._dynamo", raising=False)
        monkeypatch.setattr(iv, "GUARD_FROM_PARAMS", 10**12)
    return request.param


def assert_learns_to_copy(m, plan, paths):
    """Every run reads the forward's values; the layers that cannot be remade are found
    stale once (that run re-runs, copying), and are copied without a re-run after."""
    want = hooked_outputs(m, X, plan.capture)
    runs = [run(m, X, plan) for _ in range(3)]
    for r in runs:
        assert all(torch.equal(r.captures[p][-1].tensor, want[p]) for p in plan.capture)
    assert set(paths) <= set(runs[0].recaptured) | set(runs[1].recaptured)
    assert runs[2].recaptured == ()
    assert not any(remade(runs[2].captures[p][0]) for p in paths)
    assert all(runs[2].captures[p][0].copied for p in paths)


def test_a_victim_whose_input_changes_too_is_copied_from_then_on(first_run):
    torch.manual_seed(0)
    m = InputOverwritten().eval()
    # conv not captured: only the remake would hold its output
    assert_learns_to_copy(m, Plan(capture=["bn"]), ["bn"])


def test_statistics_changed_during_the_forward_make_the_victim_copied(first_run):
    torch.manual_seed(0)
    src = block()
    m = WeightsTouched().eval()
    m.load_state_dict(src.state_dict())
    # One change among a run's remade layers makes them all copied (their versions
    # are summed once, not checked layer by layer).
    assert_learns_to_copy(m, Plan(capture=LEAVES), ["bn1", "bn2"])


def test_the_guarded_first_run_remakes_instead_of_copying(first_run):
    m = block()
    want = hooked_outputs(m, X, LEAVES)
    res = run(m, X, Plan(capture=LEAVES))
    assert (res.recaptured == ()) == (first_run == "guarded")
    assert all(remade(res.captures[p][0]) == (first_run == "guarded") for p in ("bn1", "bn2"))
    assert all(torch.equal(res.captures[p][-1].tensor, want[p]) for p in LEAVES)


def test_reading_after_the_input_capture_was_changed_in_place_says_so():
    m = block()
    res = steady(m, Plan(capture=LEAVES))
    res.captures["conv1"][0].tensor.zero_()  # the user edits a capture in place
    with pytest.raises(HookscopeError, match="changed in place after the run"):
        res.captures["bn1"][0].tensor
    want = hooked_outputs(m, X, ["bn2"])
    assert torch.equal(res.captures["bn2"][0].tensor, want["bn2"])  # the others still read


def test_layers_that_could_change_the_output_are_copied_not_remade():
    m = block()
    plan = Plan(capture=LEAVES)
    # Another forward hook on bn1 (it doubles the output), and bn2 in train mode.
    h = m.bn1.register_forward_hook(lambda mod, args, out: out * 2)
    m.bn2.train()
    try:
        snap = {k: v.clone() for k, v in m.state_dict().items()}
        run(m, X, plan)
        m.load_state_dict(snap)
        want = hooked_outputs(m, X, LEAVES)
        m.load_state_dict(snap)
        res = run(m, X, plan)
    finally:
        h.remove()
    for p in ("bn1", "bn2"):
        rec = res.captures[p][0]
        assert rec.copied and not remade(rec), p
        assert torch.equal(rec.tensor, want[p]), p


def test_statistics_and_pickling_compute_the_remade_tensor():
    m = block()
    want = hooked_outputs(m, X, ["bn1"])
    res = steady(m, Plan(capture=LEAVES))
    rec = res.captures["bn1"][0]
    # Five layers' calls, relu's two included: all one shape.
    assert res.captured_bytes == 6 * X.numel() * X.element_size()
    assert remade(rec)  # bytes are counted without computing the tensor
    copy = pickle.loads(pickle.dumps(rec))
    assert torch.equal(copy.tensor, want["bn1"]) and copy.copied
    rec2 = res.captures["bn2"][0]
    assert rec2.stats.min == pytest.approx(float(hooked_outputs(m, X, ["bn2"])["bn2"].min()))


class Norm1d(nn.Module):
    """BatchNorm1d on (N, C) and on (N, C, L), each overwritten by an in-place ReLU."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(6, 8)
        self.bn = nn.BatchNorm1d(8)
        self.conv = nn.Conv1d(8, 8, 3, padding=1)
        self.bn_seq = nn.BatchNorm1d(8)
        self.relu = nn.ReLU(inplace=True)

    def forward(self, x):
        h = self.relu(self.bn(self.lin(x)))
        return self.relu(self.bn_seq(self.conv(h.unsqueeze(-1).expand(-1, -1, 5).contiguous())))


def test_other_layouts_remade_bit_for_bit():
    torch.manual_seed(0)
    m1 = Norm1d().eval()
    for bn in (m1.bn, m1.bn_seq):
        with torch.no_grad():
            bn.running_mean.normal_(0, 0.5)
            bn.running_var.uniform_(0.3, 3.0)
    x1 = torch.randn(3, 6)
    m2 = block().to(memory_format=torch.channels_last)
    x2 = X.to(memory_format=torch.channels_last)
    for m, x, bns in ((m1, x1, ["bn", "bn_seq"]), (m2, x2, ["bn1", "bn2"])):
        plan = Plan(capture=bns)
        run(m, x, plan)
        res = run(m, x, plan)
        want = hooked_outputs(m, x, bns)
        for p in bns:
            rec = res.captures[p][0]
            assert remade(rec), p
            got = rec.tensor
            assert torch.equal(got, want[p]) and got.stride() == want[p].stride(), p


def test_a_comparisons_victims_are_right_first_run_and_after(first_run):
    """compare(): the baseline's captures (a plain run, which may remake its victims)
    and the intervened run's (joined with them), on the model's first run and after."""
    from hookscope.core import compare

    m = block()
    want = hooked_outputs(m, X, LEAVES)
    plan = Plan(capture=LEAVES, clamp={"conv1": (-0.5, 0.5)})
    h = m.conv1.register_forward_hook(lambda mod, args, out: out.clamp(-0.5, 0.5))
    try:
        clamped = hooked_outputs(m, X, LEAVES)
    finally:
        h.remove()
    for _ in range(2):
        res = compare(m, X, plan)
        for p in ("bn1", "bn2"):
            rec = res.captures[p][0]
            assert rec.copied, p
            assert torch.equal(rec.baseline_tensor, want[p]), p
            assert torch.equal(rec.tensor, clamped[p]), p
