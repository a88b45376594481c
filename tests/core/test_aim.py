"""``at=``: positions, heads and units, each equal to a hand-written forward hook doing the same."""

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from vit_models import TinyViT

from hookscope.core import At, MeanAblate, Noise, Patch, Plan, Scale, Zero, compare, load_model
from hookscope.core.base.errors import PlanError
from hookscope.core.model.inputs import parse_input
from hookscope.core.plan.intervention_registry import from_dict, parse_intervention

PROMPT, OTHER = "the cat sat on the ", "the dog sat on the "


def hooked_output(model, x, layer, hook, pre=False):
    """The model's output with one plain hook on ``layer`` (a pre-hook when ``pre``)."""
    mod = model.get_submodule(layer)
    h = mod.register_forward_pre_hook(hook) if pre else mod.register_forward_hook(hook)
    try:
        with torch.no_grad():
            return model(x)
    finally:
        h.remove()


def recorded(model, x, layer, pre=False):
    """``layer``'s output (or first input, when ``pre``) of one forward."""
    got = []
    mod = model.get_submodule(layer)
    if pre:
        h = mod.register_forward_pre_hook(lambda m, a: got.append(a[0].detach().clone()))
    else:
        h = mod.register_forward_hook(lambda m, a, o: got.append(o.detach().clone()))
    try:
        with torch.no_grad():
            model(x)
    finally:
        h.remove()
    return got[0]


@pytest.fixture(scope="module")
def lm():
    loaded = load_model("demo:lm")
    codec = loaded.meaning.codec
    return loaded, parse_input("text:" + PROMPT, loaded.example_input, codec), codec


def test_positions_units_and_ranges_equal_hand_hooks(lm):
    loaded, x, _ = lm
    model = loaded.module

    def by_hand(o):
        o = o.clone()
        o[:, 3:6] = 0  # scale:0@pos=3:6
        return o

    cases = [
        (Scale(0.0, at=At(positions="3:6")), by_hand),
        (Scale(2.0, at=At(positions=[-1, 0])),
         lambda o: torch.cat([o[:, :1] * 2, o[:, 1:-1], o[:, -1:] * 2], 1)),
        (Zero(at=At(units=[1, 5], positions="last")), lambda o: _zero_units_last(o, [1, 5])),
        (Scale(0.5, at=At(positions="0:999999999999")), lambda o: o * 0.5),
    ]
    for iv, hand in cases:
        r = compare(model, x, Plan(interventions={"blocks.0": iv}))
        want = hooked_output(model, x, "blocks.0", lambda m, a, o, hand=hand: hand(o))
        assert torch.equal(r.output_with, want), iv.describe()
        assert r.outputs_differ


def _zero_units_last(o, units):
    o = o.clone()
    for u in units:
        o[:, -1, u] = 0
    return o


def test_noise_at_positions_draws_for_the_selected_part(lm):
    loaded, x, _ = lm
    iv = Noise(0.3, seed=4, at=At(positions=[1, 2]))
    r = compare(loaded.module, x, Plan(interventions={"blocks.1": iv}))

    def hand(m, a, o):
        o = o.clone()
        g = torch.Generator().manual_seed(4)
        o[:, 1:3] += 0.3 * torch.randn(o[:, 1:3].shape, generator=g)
        return o
    assert torch.equal(r.output_with, hooked_output(loaded.module, x, "blocks.1", hand))


def test_heads_on_demo_lm_equal_a_hand_split_of_the_projection_input(lm):
    loaded, x, _ = lm
    model = loaded.module
    n_head = model.blocks[0].attn.n_head
    iv = parse_intervention("zero@heads=0,2@pos=last")

    def hand(m, args):
        h = args[0].clone()
        b, t, d = h.shape
        v = h.view(b, t, n_head, d // n_head)
        v[:, -1, [0, 2]] = 0
        return (h,)
    r = compare(model, x, Plan(capture=["blocks.0.attn"], interventions={"blocks.0.attn": iv}))
    assert torch.equal(r.output_with, hooked_output(model, x, "blocks.0.attn.proj", hand, pre=True))
    assert r.outputs_differ
    # The hooks are gone afterwards: the model gives its plain output again.
    with torch.no_grad():
        assert torch.equal(model(x), r.output_without)
    assert not model.blocks[0].attn.proj._forward_pre_hooks


def test_prompt_to_prompt_patch_at_the_last_position(lm):
    loaded, x, codec = lm
    other = parse_input("text:" + OTHER, loaded.example_input, codec)
    iv = Patch("text:" + OTHER, at=At(positions=[-1]))
    r = compare(loaded.module, x, Plan(interventions={"blocks.1": iv}), codec=codec)
    src = recorded(loaded.module, other, "blocks.1")

    def hand(m, a, o):
        o = o.clone()
        o[:, -1] = src[:, -1]
        return o
    assert torch.equal(r.output_with, hooked_output(loaded.module, x, "blocks.1", hand))
    assert r.outputs_differ


def test_patch_of_a_longer_prompt_aligns_the_last_position_and_refuses_all(lm):
    loaded, x, codec = lm
    longer = "the big black dog sat on the "
    other = parse_input("text:" + longer, loaded.example_input, codec)
    assert other.shape[1] != x.shape[1]
    r = compare(loaded.module, x, Plan(interventions={"blocks.1": Patch("text:" + longer,
                                                                          at=At(positions="-2:"))}),
                codec=codec)
    src = recorded(loaded.module, other, "blocks.1")

    def hand(m, a, o):
        o = o.clone()
        o[:, -2:] = src[:, -2:]
        return o
    assert torch.equal(r.output_with, hooked_output(loaded.module, x, "blocks.1", hand))
    with pytest.raises(PlanError, match=rf"target has {x.shape[1]} positions and the source {other.shape[1]}"):
        compare(loaded.module, x, Plan(interventions={"blocks.1": Patch("text:" + longer,
                                                                          at=At(positions="0:4"))}),
                codec=codec) if x.shape[1] < 4 else compare(
            loaded.module, x, Plan(interventions={"blocks.1": Patch("text:" + longer,
                                                                      at=At(positions=":"))}),
            codec=codec)
    with pytest.raises(PlanError, match="source input"):  # no positions: the shapes must match
        compare(loaded.module, x, Plan(interventions={"blocks.1": Patch("text:" + longer)}),
                codec=codec)


def test_mean_reference_text_at_positions(lm):
    loaded, x, codec = lm
    other = parse_input("text:" + OTHER, loaded.example_input, codec)
    r = compare(loaded.module, x, Plan(interventions={
        "blocks.0": MeanAblate("text:" + OTHER, at=At(positions=[-1]))}), codec=codec)
    src = recorded(loaded.module, other, "blocks.0")

    def hand(m, a, o):
        o = o.clone()
        o[:, -1] = src[:, -1].double().mean(0).float()
        return o
    assert torch.equal(r.output_with, hooked_output(loaded.module, x, "blocks.0", hand))


def test_text_source_without_a_tokenizer_still_says_so(lm):
    loaded, x, _ = lm
    with pytest.raises(Exception, match="tokenizer"):
        compare(loaded.module, x, Plan(interventions={"blocks.0": Patch("text:" + OTHER)}))


def test_heads_positions_units_and_image_refusal_on_a_plain_torch_vit():
    torch.manual_seed(0)
    model = TinyViT().eval()
    x = torch.randn(2, 3, 16, 16)
    r = compare(model, x, Plan(interventions={"attn": Scale(0.0, at=At(heads=[1, 3], positions=[0, 5]))}))

    def pre(m, a):
        h = a[0].clone()
        v = h.view(*h.shape[:-1], 4, -1)
        for p in (0, 5):
            v[:, p, [1, 3]] = 0
        return (h,)
    assert torch.equal(r.output_with, hooked_output(model, x, "attn.proj", pre, pre=True))
    r = compare(model, x, Plan(interventions={"attn.proj": Scale(0.0, at=At(positions=[0, 3],
                                                                                units="4:8"))}))

    def hand_out(m, a, o):
        o = o.clone()
        o[:, [0, 3], 4:8] = 0
        return o
    assert torch.equal(r.output_with, hooked_output(model, x, "attn.proj", hand_out))
    with pytest.raises(PlanError, match="image feature maps"):
        compare(model, x, Plan(interventions={"embed": Zero(at=At(positions=[0]))}))
    # units of a conv output are its channels
    r = compare(model, x, Plan(interventions={"embed": Zero(at=At(units=[2]))}))
    assert torch.equal(r.output_with, hooked_output(
        model, x, "embed", lambda m, a, o: o.index_fill(1, torch.tensor([2]), 0)))


class MhaModel(nn.Module):
    def __init__(self, batch_first):
        super().__init__()
        self.mha = nn.MultiheadAttention(8, 2, batch_first=batch_first)
        self.fc = nn.Linear(8, 3)

    def forward(self, x):
        y, _ = self.mha(x, x, x, need_weights=False)
        return self.fc(y)


def mha_by_hand(mha, x, heads, positions=None):
    """nn.MultiheadAttention's output with ``heads`` zeroed, the heads split by hand:
    q/k/v projections, softmax attention per head, out_proj."""
    if not mha.batch_first:
        x = x.transpose(0, 1)
    b, t, e = x.shape
    h = mha.num_heads
    q, k, v = F.linear(x, mha.in_proj_weight, mha.in_proj_bias).split(e, -1)
    q, k, v = (z.view(b, t, h, e // h).transpose(1, 2) for z in (q, k, v))
    y = torch.softmax(q @ k.transpose(-1, -2) / (e // h) ** 0.5, -1) @ v  # (b, h, t, d)
    y = y.transpose(1, 2).clone()  # (b, t, h, d)
    for p in positions if positions is not None else [slice(None)]:
        y[:, p, heads] = 0
    out = F.linear(y.reshape(b, t, e), mha.out_proj.weight, mha.out_proj.bias)
    return out if mha.batch_first else out.transpose(0, 1)


@pytest.mark.parametrize("batch_first", [True, False])
def test_multihead_attention_heads_equal_a_hand_split(batch_first):
    torch.manual_seed(0)
    model = MhaModel(batch_first).eval()
    x = torch.randn(2, 5, 8) if batch_first else torch.randn(5, 2, 8)
    for at, positions in ((At(heads=[1]), None), (At(heads=[0], positions=[-1]), [-1])):
        r = compare(model, x, Plan(capture=["mha"], interventions={"mha": Zero(at=at)}))

        def hook(m, args, kwargs, out, at=at):  # the same, written as a plain forward hook
            q = args[0].transpose(0, 1) if m.batch_first else args[0]
            e = m.embed_dim
            heads, _ = F.multi_head_attention_forward(
                q, q, q, e, m.num_heads, m.in_proj_weight, m.in_proj_bias, None, None, False, 0.0,
                torch.eye(e), None, training=False, need_weights=False)
            heads = heads.transpose(0, 1) if m.batch_first else heads
            v = heads.clone().unflatten(-1, (m.num_heads, -1))
            seq = 1 if m.batch_first else 0
            idx = [slice(None)] * 4
            idx[2] = list(at.heads)
            if at.positions is not None:
                idx[seq] = [p % v.shape[seq] for p in at.positions]
            v[tuple(idx)] = 0
            return (F.linear(v.flatten(-2), m.out_proj.weight, m.out_proj.bias), *out[1:])
        h = model.mha.register_forward_hook(hook, with_kwargs=True)
        with torch.no_grad():
            want = model(x)
        h.remove()
        # Two routes to the same numbers: Hookscope splits the heads inside the module's
        # own forward, the hand hook recomputes attention with F.multi_head_attention_forward
        # and an identity out_proj. Their float32 sums may round apart in the last bit
        # (seen on AMD EPYC: 6.2306e-03 against 6.2307e-03), so to float32 rounding.
        torch.testing.assert_close(r.output_with, want, rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(r.captures["mha"][0].tensor, mha_by_hand(
            model.mha, x, list(at.heads), positions))
        assert not model.mha._forward_hooks
    src = torch.randn_like(x)
    r = compare(model, x, Plan(interventions={"mha": Patch(src, at=At(heads=[0]))}))
    assert r.outputs_differ


def test_heads_on_a_module_without_heads_say_why():
    model = nn.Sequential(nn.Linear(4, 8))
    with pytest.raises(PlanError, match="attention modules only"):
        Plan(interventions={"0": Zero(at=At(heads=[0]))}).resolve(model)


def test_at_round_trips_through_dicts_text_and_pickle():
    import pickle

    iv = parse_intervention("scale:0.5@pos=3:6,-1@heads=0,5@units=all")
    assert iv.where() == At(positions="3:6,-1", heads=[0, 5])
    assert from_dict(iv.to_dict()) == iv
    assert pickle.loads(pickle.dumps(iv)) == iv
    assert parse_intervention("zero:3,7") == Zero(units=(3, 7))
    assert iv.describe() == "scale(0.5) @pos=3:6,-1@heads=0,5"
    p = Plan(interventions={"blocks.0": iv, "blocks.1": Patch("text:hi", at=At(positions=[-1]))})
    assert Plan.from_dict(p.to_dict()) == p
    with pytest.raises(PlanError, match="given twice"):
        Zero(units=(1,), at=At(units=[2]))


def test_session_file_round_trip_keeps_at_and_text_sources(tmp_path):
    import json

    from hookscope.core import Session

    s = Session.load("demo:lm")
    try:
        s.set_input("text:" + PROMPT)
        s.intervene("blocks.1", Patch("text:" + OTHER, at=At(positions=[-1])))
        s.intervene("blocks.0.attn", Zero(at=At(heads=[0, 2])))
        r = s.run()
        f = s.save(tmp_path / "aim.hookscope.json")
    finally:
        assert s.close()
    saved = json.loads(f.read_text())["plan"]["interventions"]
    assert saved["blocks.1"]["at"] == {"positions": "-1"}
    assert saved["blocks.0.attn"] == {"kind": "zero", "units": None, "dim": None,
                                      "at": {"heads": "0,2"}}
    again = Session.open_file(f)
    try:
        r2 = again.run()
    finally:
        assert again.close()
    assert again.plan == s.plan
    assert torch.equal(r2.output_with, r.output_with) and r.outputs_differ


def test_a_reused_baseline_does_not_mix_a_layers_output_with_its_heads_input(lm):
    """Live mode reuses the source forward: the same source for a layer's output and then
    for its heads (the projection's input, same shape here) must not be confused."""
    loaded, x, codec = lm
    model = loaded.module
    first = compare(model, x, Plan(interventions={
        "blocks.0.attn": Patch("text:" + OTHER, at=At(positions=[-1]))}), codec=codec)
    heads = Plan(interventions={"blocks.0.attn": Patch("text:" + OTHER, at=At(heads=[1]))})
    again = compare(model, x, heads, codec=codec, baseline=first.baseline)
    fresh = compare(model, x, heads, codec=codec)
    assert again.baseline_reused and torch.equal(again.output_with, fresh.output_with)


def test_zero_units_shorthand_combines_with_positions(lm):
    loaded, x, _ = lm
    r = compare(loaded.module, x, Plan(interventions={
        "blocks.0": Zero(units=(2, 9), at=At(positions=[0, -1]))}))
    assert torch.equal(r.output_with, hooked_output(
        loaded.module, x, "blocks.0",
        lambda m, a, o: _zero_units_last(_zero_units_first(o, [2, 9]), [2, 9])))


def _zero_units_first(o, units):
    o = o.clone()
    for u in units:
        o[:, 0, u] = 0
    return o


def test_a_text_prompt_in_the_arguments_keeps_its_trailing_space():
    assert parse_intervention("patch:text:" + OTHER + "@pos=-1") == Patch("text:" + OTHER,
                                                                          at=At(positions=[-1]))
    assert parse_intervention(" scale:0.5 ") == Scale(0.5)
