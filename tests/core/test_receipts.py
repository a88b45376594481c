"""Receipts: every intervention of a run says how often it fired, what it changed, and
raises an alarm when it fired zero times, changed nothing, or its change never reached
the output."""

import math

import pytest
import torch
from torch import nn

from hookscope.core import At, Clamp, Plan, Scale, Zero, compare, load_model, parse_input, run
from hookscope.core.engine.receipts import ABSORBED, CHANGED_NOTHING, FIRED_ZERO


class Overwritten(nn.Module):
    """``a``'s output is computed and thrown away: ``b`` recomputes from the input."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.a = nn.Linear(4, 4)
        self.b = nn.Linear(4, 4)
        self.unused = nn.Linear(4, 4)

    def forward(self, x):
        _ = self.a(x)
        return self.b(x)


class Twice(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.f = nn.Linear(4, 4)

    def forward(self, x):
        return self.f(self.f(x))


X = torch.tensor([[0.5, -1.0, 2.0, 0.25]])


def test_a_clamp_that_changes_nothing_raises_the_alarm():
    lm = load_model("demo:clamp")
    r = compare(lm.module, lm.example_input, Plan(clamp={"0": (-1e6, 1e6)}))
    rc = r.receipts["0"]
    assert rc.fired_calls == 1 and rc.changed == 0 and rc.relative_change == 0
    assert rc.alarm == CHANGED_NOTHING and r.alarms == [f"0: {rc.intervention} {CHANGED_NOTHING}"]


def test_a_clamp_that_bites_counts_what_it_changed():
    lm = load_model("demo:clamp")
    x = lm.example_input
    r = compare(lm.module, x, Plan(capture=["0"], clamp={"0": (-0.5, 0.5)}))
    before = r.captures["0"][0].baseline_tensor.double()
    after = before.clamp(-0.5, 0.5)
    rc = r.receipts["0"]
    assert rc.changed == int((before != after).sum()) > 0 and rc.elements == before.numel()
    assert rc.changed_fraction == rc.changed / before.numel()
    assert rc.relative_change == pytest.approx(float((after - before).norm() / before.norm()))
    assert rc.output_changed and rc.alarm is None


def test_a_zero_whose_output_is_overwritten_says_it_was_absorbed():
    m = Overwritten().eval()
    r = compare(m, X, Plan(interventions={"a": Zero(), "unused": Scale(2.0)}))
    assert r.receipts["a"].fired_calls == 1 and r.receipts["a"].changed == 4
    assert r.receipts["a"].alarm == ABSORBED and not r.receipts["a"].output_changed
    assert r.receipts["unused"].fired_calls == 0 and r.receipts["unused"].alarm == FIRED_ZERO


def test_a_module_called_twice_counts_both_calls():
    m = Twice().eval()
    r = compare(m, X, Plan(interventions={"f": Scale(3.0)}))
    rc = r.receipts["f"]
    with torch.no_grad():
        y1 = m.f(X)
        y2 = m.f(3 * y1)
    d1, d2 = 2 * y1, 2 * y2  # 3x - x at each call, on each call's own input
    assert rc.fired_calls == 2 and rc.elements == 8
    assert rc.changed == int((d1 != 0).sum() + (d2 != 0).sum())
    want = math.sqrt(float(d1.double().square().sum() + d2.double().square().sum())
                     / float(y1.double().square().sum() + y2.double().square().sum()))
    assert rc.relative_change == pytest.approx(want)
    out_rel = float((r.output_with - r.output_without).double().norm()
                    / r.output_without.double().norm())
    assert rc.output_relative_change == pytest.approx(out_rel) and rc.alarm is None


def test_capture_only_runs_have_no_receipts():
    lm = load_model("demo:lm")
    x = parse_input("text:the cat", lm.example_input, lm.meaning.codec)
    r = compare(lm.module, x, Plan(capture=["blocks.0"]))
    assert r.receipts == {} and r.to_json_dict()["receipts"] == {}
    assert run(lm.module, x, Plan(capture=["blocks.0"])).tallies == {}


def test_nan_beside_nan_counts_as_unchanged():
    class WithNaN(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.f = nn.Identity()

        def forward(self, x):
            return self.f(x) * 1.0

    x = torch.tensor([[float("nan"), 2.0, -3.0, 0.5]])
    rc = compare(WithNaN(), x, Plan(clamp={"f": (-1, 1)})).receipts["f"]
    assert rc.changed == 2 and rc.elements == 4
    assert rc.relative_change == pytest.approx(math.sqrt((1 + 4) / (4 + 9 + 0.25)))


def test_heads_picked_at_the_projection_fire_their_receipt():
    # Head targets act in a pre-hook on the output projection, not in the layer's own hook:
    # the receipt must count them there, not cry "fired zero times".
    lm = load_model("demo:lm")
    x = parse_input("text:the cat sat on the ", lm.example_input, lm.meaning.codec)
    n_head = lm.module.blocks[0].attn.n_head
    iv = Zero(at=At(heads=[0]))
    r = compare(lm.module, x, Plan(interventions={"blocks.0.attn": iv}))
    rec = r.receipts["blocks.0.attn"]
    assert rec.fired_calls == 1
    width = lm.module.blocks[0].attn.proj.in_features
    assert 0 < rec.changed <= x.shape[-1] * width // n_head
    assert rec.alarm is None


def test_mha_heads_fire_their_receipt():
    torch.manual_seed(0)
    mha = nn.MultiheadAttention(8, 2, batch_first=True).eval()

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.mha = mha

        def forward(self, x):
            return self.mha(x, x, x)[0]

    x = torch.randn(1, 5, 8)
    r = compare(Net(), x, Plan(interventions={"mha": Scale(0.0, at=At(heads=[1]))}))
    rec = r.receipts["mha"]
    assert rec.fired_calls == 1 and rec.changed > 0 and rec.alarm is None


def test_each_line_says_what_its_intervention_did_and_the_plans_effect_is_said_once():
    """A clamp that changed nothing beside a scale that changed the output: the clamp's
    line holds its alarm and no "output changed" (the scale's doing)."""
    from hookscope.core.engine import plan_effect

    lm = load_model("demo:features")
    plan = Plan(interventions={"fc1": Clamp(-1e6, 1e6), "fc2": Scale(3.0)})
    r = compare(lm.module, lm.example_input, plan)
    clamp, scale = r.receipts["fc1"].line(), r.receipts["fc2"].line()
    assert "ALARM: " + CHANGED_NOTHING in clamp and "output" not in clamp
    assert "ALARM" not in scale and "output" not in scale
    diff = float((r.output_with - r.output_without).abs().max())
    assert diff > 0
    assert plan_effect(r.receipts) == (f"output (the whole plan): changed (max |diff| {diff:.3g}, "
                                       f"|d|/|x| {r.receipts['fc2'].output_relative_change:.3g})")
    same = compare(lm.module, lm.example_input, Plan(interventions={"fc1": Clamp(-1e6, 1e6)}))
    assert plan_effect(same.receipts) == "output (the whole plan): unchanged"
