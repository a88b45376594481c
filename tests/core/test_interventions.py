"""Every intervention kind against a hand-written forward hook doing the same, in torch."""

import math
from collections import namedtuple

import pytest
import torch
from torch import nn

from hookscope.core import (Clamp, Intervention, MeanAblate, Noise, Patch, Plan, PlanError, Scale,
                            Zero, compare, kinds, parse_intervention)
from hookscope.core.plan.interventions import feature_dim


def hand_hooked(model, layer, fn, x):
    """The model's output with a plain torch forward hook ``fn(output)`` on ``layer``."""
    h = dict(model.named_modules())[layer].register_forward_hook(lambda m, i, o: fn(o))
    try:
        with torch.inference_mode():
            return model(x)
    finally:
        h.remove()


def mlp():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(3, 6), nn.ReLU(), nn.Linear(6, 2)).eval()


def cnn():
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(1, 4, 3), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 4 * 4, 3)).eval()


X = torch.tensor([[1.0, -2.0, 3.0], [0.5, 0.1, -1.0], [2.0, 2.0, 2.0]])


def noise_ref(o, std, seed):
    g = torch.Generator().manual_seed(seed)
    return o + std * torch.randn(o.shape, generator=g)


def zero_units(o, dim, units):
    o = o.clone()
    o[(slice(None),) * dim + (list(units),)] = 0
    return o


CASES = [
    (Clamp(-0.2, 0.3), lambda o: o.clamp(-0.2, 0.3)),
    (Clamp(None, 0.1), lambda o: o.clamp(max=0.1)),
    (Clamp(lo=0.0), lambda o: o.clamp(min=0.0)),
    (Scale(0.5), lambda o: o * 0.5),
    (Zero(), lambda o: torch.zeros_like(o)),
    (Zero(units=(1, 4)), lambda o: zero_units(o, 1, (1, 4))),
    (Zero(units=(0,), dim=0), lambda o: zero_units(o, 0, (0,))),
    (MeanAblate(), lambda o: o.mean(0, keepdim=True).expand_as(o)),
    (Noise(0.3, seed=5), lambda o: noise_ref(o, 0.3, 5)),
]


@pytest.mark.parametrize("iv,ref", CASES, ids=[c[0].describe() for c in CASES])
def test_each_kind_matches_a_hand_written_hook(iv, ref):
    model = mlp()
    want = hand_hooked(model, "0", ref, X)
    r = compare(model, X, Plan(capture=["0"], interventions={"0": iv}))
    torch.testing.assert_close(r.output_with, want, rtol=1e-6, atol=1e-6)
    rec = r.captures["0"][0]
    # The record: before = the plain layer output, after = the hand-written change of it.
    with torch.inference_mode():
        plain = model[0](X)
    torch.testing.assert_close(rec.pre_tensor, plain)
    torch.testing.assert_close(rec.tensor, ref(plain), rtol=1e-6, atol=1e-6)
    changed = float((rec.tensor != plain).float().mean())
    assert rec.stats.fraction_changed == pytest.approx(changed)


def test_zero_units_follow_the_channel_axis_of_a_conv_output():
    model = cnn()
    x = torch.randn(2, 1, 6, 6, generator=torch.Generator().manual_seed(1))
    want = hand_hooked(model, "0", lambda o: zero_units(o, 1, (0, 2)), x)
    r = compare(model, x, Plan(capture=["0"], interventions={"0": Zero(units=(0, 2))}))
    torch.testing.assert_close(r.output_with, want)
    out = r.captures["0"][0].tensor
    assert bool((out[:, [0, 2]] == 0).all()) and bool((out[:, 1] != 0).any())
    assert feature_dim(out, model[0]) == 1 and feature_dim(torch.zeros(2, 5, 7)) == 2
    assert feature_dim(torch.zeros(2, 5, 7), nn.Conv1d(5, 5, 1)) == 1


def test_zero_refuses_units_out_of_range():
    with pytest.raises(PlanError, match="out of range.*6 along dim 1"):
        compare(mlp(), X, Plan(interventions={"0": Zero(units=(9,))}))


def test_noise_is_the_same_on_every_call_and_on_every_run():
    lin = nn.Linear(3, 3)
    model = nn.Sequential(lin, lin).eval()  # one module called twice
    r1 = compare(model, X, Plan(capture=["0"], interventions={"0": Noise(0.5, seed=3)}))
    r2 = compare(model, X, Plan(capture=["0"], interventions={"0": Noise(0.5, seed=3)}))
    torch.testing.assert_close(r1.output_with, r2.output_with, rtol=0, atol=0)
    c0, c1 = r1.captures["0"]
    torch.testing.assert_close(c0.tensor - c0.pre_tensor, c1.tensor - c1.pre_tensor)
    r3 = compare(model, X, Plan(interventions={"0": Noise(0.5, seed=4)}))
    assert not torch.equal(r3.output_with, r1.output_with)


class Nested(nn.Module):
    Out = namedtuple("Out", "h ids")

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 4)

    def forward(self, x):
        h = self.fc(x)
        return {"pair": (h, self.Out(h * 2, torch.arange(4) * 3)), "mask": h > 0, "name": "tag"}


class UsesNested(nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = Nested()

    def forward(self, x):
        o = self.inner(x)
        h, nt = o["pair"]
        assert o["name"] == "tag"
        return h + nt.h + nt.ids.float() + o["mask"].float()


@pytest.mark.parametrize("iv", [Clamp(0.0, 5.5), Scale(1.5), Zero(), MeanAblate(), Noise(0.2)],
                         ids=lambda iv: iv.name)
def test_nested_outputs_keep_structure_and_integer_leaves_stay_integer(iv):
    torch.manual_seed(0)
    model = UsesNested().eval()
    r = compare(model, X, Plan(capture=["inner"], interventions={"inner": iv}))

    floats = {Clamp: lambda t: t.clamp(0.0, 5.5), Scale: lambda t: t * 1.5, Zero: torch.zeros_like,
              MeanAblate: lambda t: t.mean(0, keepdim=True).expand_as(t),
              Noise: lambda t: noise_ref(t, 0.2, 0)}[type(iv)]
    ints = {Clamp: lambda t: t.clamp(0, 5), Scale: lambda t: (t * 1.5).round().long(),
            Zero: torch.zeros_like, Noise: lambda t: t,  # noise leaves integer tensors alone
            MeanAblate: lambda t: t.double().mean(0, keepdim=True).expand(t.shape).round().long(),
            }[type(iv)]

    def by_hand(o):
        h, nt = o["pair"]
        return {"pair": (floats(h), Nested.Out(floats(nt.h), ints(nt.ids))), "mask": o["mask"],
                "name": "tag"}

    want = hand_hooked(model, "inner", by_hand, X)
    torch.testing.assert_close(r.output_with, want)
    shapes = r.captures["inner"][0].leaf_shapes
    assert list(shapes) == ["['pair'][0]", "['pair'][1][0]", "['pair'][1][1]", "['mask']"]


def test_integer_output_stays_integer():
    class Ids(nn.Module):
        def forward(self, x):
            return (x * 10).long()

    model = nn.Sequential(Ids(), nn.Identity())
    for iv in (Clamp(0.5, 12.5), Scale(0.25), MeanAblate(), Zero(units=(1,))):
        r = compare(model, X, Plan(capture=["0"], interventions={"0": iv}))
        assert r.output_with.dtype == torch.int64, iv


def test_parse_to_dict_and_back_for_every_kind():
    samples = {"clamp": "-1:2", "scale": "0.5", "zero": "3,7:1", "mean": "", "noise": "0.1:7",
               "patch": "random:1x3:seed=2"}
    for name, args in samples.items():
        iv = parse_intervention(f"{name}:{args}" if args else name)
        assert iv.name == name
        assert Intervention.from_dict(iv.to_dict()) == iv
        assert isinstance(iv.describe(), str) and iv.describe()
    assert parse_intervention("clamp::0.5") == Clamp(None, 0.5)
    assert parse_intervention("clamp:-inf:inf").bounds() == (-math.inf, math.inf)
    assert Intervention.from_dict(Clamp(None, 1.0).to_dict()).bounds() == (-math.inf, 1.0)
    assert set(kinds()) >= set(samples)


@pytest.mark.parametrize("text,words", [
    ("clamp:2:1", "lo must be <= hi"), ("scale", "scale:FACTOR"), ("scale:x", "must be a number"),
    ("noise:-1", "must be >= 0"), ("zero:a,b", "integers separated by commas"),
    ("wobble:1", "unknown intervention kind"), ("zero:1:2:3", "DIM must be an integer"),
])
def test_bad_arguments_say_the_syntax(text, words):
    with pytest.raises(PlanError, match=words):
        parse_intervention(text)


def test_parameters_describe_editors():
    by_kind = {name: {p.name: p for p in cls.params()} for name, cls in kinds().items()}
    assert by_kind["noise"]["std"].lo == 0.0 and by_kind["noise"]["seed"].start == 0
    assert by_kind["clamp"]["lo"].optional and by_kind["zero"]["units"].type == "units"
    assert by_kind["patch"]["source_input"].type == "input"
    assert Scale.draggable == ("factor",) and Noise.draggable == ("std",) and Zero.draggable == ()
    assert Clamp.draggable == ("lo", "hi")
    assert Scale(2.0).with_value("factor", 3.0) == Scale(3.0)
    assert Clamp(-1, 1).bounds() == (-1.0, 1.0) and Scale(2.0).bounds() is None


def test_plan_shorthand_and_edits():
    p = Plan(capture=["0"], clamp={"0": (-0.5, 0.5)})
    assert p.intervention_for("0") == Clamp(-0.5, 0.5) and p.clamp == {"0": (-0.5, 0.5)}
    p2 = p.with_intervention("0", Scale(2.0))
    assert p2.intervention_for("0") == Scale(2.0) and p2.clamp == {}
    assert p2.without_intervention("0").interventions == {}
    assert p.without_clamp("0").is_empty is False and p.without_clamp("0").interventions == {}
    assert Plan.from_dict(p2.with_intervention("2", Patch("[[1.0]]")).to_dict()) == \
        p2.with_intervention("2", Patch("[[1.0]]"))
    with pytest.raises(PlanError, match="one"):
        Plan(clamp={"0": (0, 1)}, interventions={"0": Scale(2.0)})
