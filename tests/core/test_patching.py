"""Activation patching and reference means: one source forward, shared, against torch by hand."""

import pytest
import torch
from torch import nn

from hookscope.core import InputError, MeanAblate, Patch, Plan, PlanError, Scale, compare, run

X = torch.tensor([[1.0, 2.0, 3.0]])
SRC = torch.tensor([[-3.0, 0.5, 2.0]])


def model():
    torch.manual_seed(1)
    return nn.Sequential(nn.Linear(3, 5), nn.ReLU(), nn.Linear(5, 4), nn.Tanh(), nn.Linear(4, 2)).eval()


def root_calls(m):
    """Count the model's forwards (a pre-hook on the root, removed by the caller)."""
    n = [0]
    return n, m.register_forward_pre_hook(lambda mod, args: n.__setitem__(0, n[0] + 1))


def patched_by_hand(m, layers, src, x):
    """Run on src, keep the layers' outputs, then run on x with them substituted."""
    mods = dict(m.named_modules())
    kept = {}
    hs = [mods[p].register_forward_hook(lambda mod, i, o, p=p: kept.__setitem__(p, o.clone()))
          for p in layers]
    with torch.inference_mode():
        m(src)
    for h in hs:
        h.remove()
    hs = [mods[p].register_forward_hook(lambda mod, i, o, p=p: kept[p]) for p in layers]
    try:
        with torch.inference_mode():
            return m(x)
    finally:
        for h in hs:
            h.remove()


def test_patch_matches_a_hand_written_patch():
    m = model()
    r = compare(m, X, Plan(capture=["0", "2"], interventions={"0": Patch(SRC)}))
    torch.testing.assert_close(r.output_with, patched_by_hand(m, ["0"], SRC, X))
    with torch.inference_mode():
        torch.testing.assert_close(r.captures["0"][0].tensor, m[0](SRC))
        torch.testing.assert_close(r.captures["0"][0].baseline_tensor, m[0](X))
    assert r.outputs_differ


def test_several_patched_layers_share_one_source_forward():
    m = model()
    n, h = root_calls(m)
    try:
        plan = Plan(interventions={"0": Patch("[[-3.0, 0.5, 2.0]]"), "2": Patch("[[-3.0, 0.5, 2.0]]"),
                                   "4": MeanAblate(reference="[[-3.0, 0.5, 2.0]]")})
        r = compare(m, X, plan)
        assert n[0] == 3  # baseline + ONE source forward + intervened
        again = compare(m, X, plan.with_intervention("4", MeanAblate("[[-3.0, 0.5, 2.0]]")),
                        baseline=r.baseline)
        assert again.baseline_reused and n[0] == 4  # the source outputs are reused too
    finally:
        h.remove()
    want = patched_by_hand(m, ["0", "2", "4"], SRC, X)  # a batch of one: its mean is itself
    torch.testing.assert_close(r.output_with, want)
    assert "source" in r.timings_ms


def test_reference_mean_matches_torch():
    m = model()
    ref = torch.tensor([[1.0, 0.0, -1.0], [2.0, 2.0, 0.5], [0.0, 3.0, 1.0]])
    with torch.inference_mode():
        mean = m[0](ref).mean(0, keepdim=True)
    h = m[0].register_forward_hook(lambda mod, i, o: mean.expand_as(o))
    with torch.inference_mode():
        want = m(X)
    h.remove()
    r = compare(m, X, Plan(interventions={"0": MeanAblate(reference=ref)}))
    torch.testing.assert_close(r.output_with, want)


def test_patch_errors_say_what_to_do():
    m = model()
    with pytest.raises(PlanError, match="same shape"):
        compare(m, X, Plan(interventions={"0": Patch(torch.zeros(2, 3))}))
    with pytest.raises(PlanError, match="needs a source input"):
        compare(m, X, Plan(interventions={"0": Patch()}))
    with pytest.raises(InputError, match="patch input"):
        compare(m, X, Plan(interventions={"0": Patch("[[1.0, oops]]")}))
    assert not m._forward_hooks and not m[0]._forward_hooks  # nothing left behind


def test_patch_with_nested_outputs_and_a_reused_module():
    lin = nn.Linear(3, 3)

    class Twice(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = lin

        def forward(self, x):
            return self.lin(torch.relu(self.lin(x))), x

    m = Twice().eval()
    r = run(m, X, Plan(capture=["lin"], interventions={"lin": Patch(SRC)}))
    with torch.inference_mode():
        first = lin(SRC)
        second = lin(torch.relu(first))
    # Each call takes the source run's output of the SAME call.
    torch.testing.assert_close(r.captures["lin"][0].tensor, first)
    torch.testing.assert_close(r.captures["lin"][1].tensor, second)
    torch.testing.assert_close(r.output[0], second)


def test_patch_source_survives_an_inplace_op_downstream():
    torch.manual_seed(2)
    m = nn.Sequential(nn.Linear(3, 4), nn.ReLU(inplace=True), nn.Linear(4, 2)).eval()
    plan = Plan(interventions={"0": Patch(SRC), "2": Scale(1.0)})
    r1 = compare(m, X, plan)
    r2 = compare(m, X, plan.with_intervention("2", Scale(1.0 + 1e-12)), baseline=r1.baseline)
    torch.testing.assert_close(r1.output_with, patched_by_hand(m, ["0"], SRC, X))
    torch.testing.assert_close(r2.output_with, r1.output_with)
