"""Heads and prompt-to-prompt patching on small Hugging Face models (configs saved here,
tokenizers trained here; nothing downloaded), each equal to a hand-written hook."""

import pytest
import torch

from hookscope.core import At, Patch, Plan, Scale, Zero, compare, load_model
from hookscope.core.base.errors import PlanError
from hookscope.core.model.inputs import parse_input

pytest.importorskip("transformers", reason="the hf extra (transformers) is not installed")
import hf_models  # noqa: E402  (tests/core is on sys.path)


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    root = tmp_path_factory.mktemp("hf_aim")
    return {name: getattr(hf_models, name)(root / name) for name in ("gpt2", "bert", "llama", "vit")}


def first(out):
    """The logits of a model output (a ModelOutput or a tensor)."""
    return out.logits if hasattr(out, "logits") else out


def with_pre_hook(model, proj, hook, x):
    h = model.get_submodule(proj).register_forward_pre_hook(hook)
    try:
        with torch.no_grad():
            return first(model(**x) if isinstance(x, dict) else model(x))
    finally:
        h.remove()


def head_zeroer(n_heads, heads, positions=None):
    """A hand-written pre-hook: split the projection's input into heads, zero some."""
    def hook(m, args):
        h = args[0].clone()
        v = h.view(*h.shape[:-1], n_heads, h.shape[-1] // n_heads)
        if positions is None:
            v[..., heads, :] = 0
        else:
            for p in positions:
                v[:, p, heads, :] = 0
        return (h,)
    return hook


@pytest.mark.parametrize("name, layer, proj", [
    ("gpt2", "transformer.h.0.attn", "transformer.h.0.attn.c_proj"),
    ("llama", "model.layers.0.self_attn", "model.layers.0.self_attn.o_proj"),
    ("bert", "bert.encoder.layer.0.attention", "bert.encoder.layer.0.attention.output.dense"),
    ("vit", None, None),
])
def test_head_ablation_equals_a_hand_split_of_the_projection_input(saved, name, layer, proj):
    lm = load_model(f"hf:{saved[name]}")
    model, x = lm.module, lm.example_input
    if layer is None:  # transformers 5 lays ViT out as vit.layers.N, 4.x as vit.encoder.layer.N
        layer = next(p for p, _ in model.named_modules() if p.endswith("0.attention"))
    attn = model.get_submodule(layer)
    if proj is None:  # transformers' ViT names its projection o_proj (5.x) or output.dense (4.x)
        proj = layer + (".o_proj" if hasattr(attn, "o_proj") else ".output.dense")
    n = model.config.num_attention_heads
    for at, positions in ((At(heads=[1]), None), (At(heads=[0], positions="last"), [-1])):
        r = compare(model, x, Plan(interventions={layer: Zero(at=at)}))
        want = with_pre_hook(model, proj, head_zeroer(n, at.heads, positions), x)
        assert torch.equal(first(r.output_with), want), (name, at)
        assert r.outputs_differ
        assert not model.get_submodule(proj)._forward_pre_hooks  # taken off again


def test_bert_self_attention_heads_act_on_its_own_output(saved):
    lm = load_model(f"hf:{saved['bert']}")
    model, x = lm.module, lm.example_input
    layer = "bert.encoder.layer.0.attention.self"
    n = model.config.num_attention_heads
    r = compare(model, x, Plan(interventions={layer: Scale(0.0, at=At(heads=[0]))}))

    def hand(m, a, out):
        h = out[0].clone()
        h.view(*h.shape[:-1], n, -1)[..., 0, :] = 0
        return (h, *out[1:])
    hd = model.get_submodule(layer).register_forward_hook(hand)
    try:
        with torch.no_grad():
            want = first(model(**x))
    finally:
        hd.remove()
    assert torch.equal(first(r.output_with), want)


def test_gpt2_prompt_to_prompt_patch_at_the_last_position(saved):
    lm = load_model(f"hf:{saved['gpt2']}")
    model, codec = lm.module, lm.meaning.codec
    x = parse_input("text:the cat sat on the", lm.example_input, codec)
    other_text = "a dog sat on the log and the"
    other = parse_input("text:" + other_text, lm.example_input, codec)
    layer = "transformer.h.1"
    iv = Patch("text:" + other_text, at=At(positions=[-1]))
    r = compare(model, x, Plan(interventions={layer: iv}), codec=codec)
    got = []
    hidden = lambda o: o[0] if isinstance(o, tuple) else o  # noqa: E731 - a block's hidden states
    h = model.get_submodule(layer).register_forward_hook(lambda m, a, o: got.append(hidden(o).clone()))
    with torch.no_grad():
        model(**other) if isinstance(other, dict) else model(other)
    h.remove()

    def hand(m, a, o):
        hs = hidden(o).clone()
        hs[:, -1] = got[0][:, -1]
        return (hs, *o[1:]) if isinstance(o, tuple) else hs
    h = model.get_submodule(layer).register_forward_hook(hand)
    try:
        with torch.no_grad():
            want = first(model(**x) if isinstance(x, dict) else model(x))
    finally:
        h.remove()
    assert torch.equal(first(r.output_with), want)
    assert r.outputs_differ


def test_heads_on_a_block_say_why_not(saved):
    lm = load_model(f"hf:{saved['gpt2']}")
    with pytest.raises(PlanError, match="heads|attention"):
        compare(lm.module, lm.example_input,
                Plan(interventions={"transformer.h.0.mlp": Zero(at=At(heads=[0]))}))
