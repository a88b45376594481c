"""Attention patterns equal the model's own probabilities: transformers' eager attentions
(``output_attentions=True`` on the same weights) for GPT-2, Llama (grouped-query heads,
rotary positions) and BERT (a padded batch), whichever attention implementation runs the
model; ``demo:lm``'s own softmax; ``nn.MultiheadAttention``'s per-head weights. Without and
with an intervention upstream (a clamp on block 0's output changes block 1's pattern, and
the "with" pattern equals the eager attentions of a model hooked by hand).

Tolerance: 1e-5 absolute on probabilities (the model may run SDPA, the reference eager:
the kernels differ in the last bits of float32).
"""

import pytest
import torch
from torch import nn

from hookscope.core import Clamp, Plan, Session, load_model, parse_intervention
from hookscope.core.analyses import AttentionRequest, AttentionResult, attention_modules
from hookscope.core.analyses.attention_patterns import attention_patterns
from hookscope.core.demos.demo_lm import CODEC

TOL = dict(atol=1e-5, rtol=0)
LO, HI = -0.01, 0.01

pytest.importorskip("transformers", reason="the hf extra (transformers) is not installed")
import hf_models  # noqa: E402  (tests/core is on sys.path)

# (builder, model class, the attention module of block 0 and 1 as "{}", block 0, eager index)
FAMILIES = {
    "gpt2": ("GPT2LMHeadModel", "transformer.h.{}.attn", "transformer.h.0"),
    "llama": ("LlamaForCausalLM", "model.layers.{}.self_attn", "model.layers.0"),
    "bert": ("BertForMaskedLM", "bert.encoder.layer.{}.attention.self", "bert.encoder.layer.0"),
}
TEXTS = ["the cat sat on the mat and the dog sat on the log", "a quick fox"]


def sharpened(folder, name):
    """The saved model with its query and key weights made larger, so that its patterns are
    far from uniform and an upstream change moves them (a fresh model's are nearly flat)."""
    model = hf_model(folder, name, "eager")
    with torch.no_grad():
        for m in model.modules():
            if hasattr(m, "c_attn"):
                m.c_attn.weight[:, :2 * m.split_size] *= 8
            for child in ("q_proj", "k_proj", "query", "key"):
                if isinstance(getattr(m, child, None), nn.Linear):
                    getattr(m, child).weight *= 8
    model.save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    root = tmp_path_factory.mktemp("hf_attention")
    return {name: sharpened(getattr(hf_models, name)(root / name), name) for name in FAMILIES}


def clamp_output(_m, _args, out):
    """A hand-written clamp of a block's output (its tensor, or each tensor of a tuple)."""
    if isinstance(out, tuple):
        return tuple(o.clamp(LO, HI) if isinstance(o, torch.Tensor) else o for o in out)
    return out.clamp(LO, HI)


def hf_model(folder, name, implementation):
    import transformers

    cls = getattr(transformers, FAMILIES[name][0])
    return cls.from_pretrained(folder, attn_implementation=implementation).eval()


def eager_attentions(folder, name, x, clamp_block=None):
    """``output_attentions=True`` of the eager model, with block 0 clamped by hand when asked."""
    model = hf_model(folder, name, "eager")
    h = model.get_submodule(clamp_block).register_forward_hook(clamp_output) if clamp_block else None
    try:
        with torch.no_grad():
            return model(**x, output_attentions=True).attentions
    finally:
        if h is not None:
            h.remove()


def batch(folder, texts):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(folder)
    tok.padding_side = "right"
    return dict(tok(texts, padding=True, return_tensors="pt"))


@pytest.mark.parametrize("implementation", ["sdpa", "eager"])
@pytest.mark.parametrize("name", list(FAMILIES))
def test_hf_patterns_equal_eager_attentions_without_and_with_an_upstream_clamp(
        saved, name, implementation):
    folder = saved[name]
    _, attn, block0 = FAMILIES[name]
    # A batch of two, the second padded (BERT reads its padding mask; the causal models
    # pad on the right, so every real query sees real keys).
    x = batch(folder, TEXTS)
    assert (x["attention_mask"][1] == 0).any(), "the second row must be padded"
    model = hf_model(folder, name, implementation)
    layers = (attn.format(0), attn.format(1))
    got = attention_patterns(model, x, Plan(clamp={block0: (LO, HI)}), None, layers)
    plain = eager_attentions(folder, name, x)
    hooked = eager_attentions(folder, name, x, clamp_block=block0)

    a0, a1 = got[layers[0]], got[layers[1]]
    n_heads = model.config.num_attention_heads
    assert a1.heads == n_heads and a1.without.shape == plain[1].shape == (2, n_heads, *x[
        "input_ids"].shape[1:] * 2)
    torch.testing.assert_close(a0.without, plain[0], **TOL)
    torch.testing.assert_close(a1.without, plain[1], **TOL)
    # Block 0's pattern comes before the clamp; block 1's is changed by it.
    torch.testing.assert_close(a0.with_, plain[0], **TOL)
    torch.testing.assert_close(a1.with_, hooked[1], **TOL)
    assert (a1.with_ - a1.without).abs().max() > 1e-3
    # Padding: no real query attends to a padded key.
    pad = x["attention_mask"][1] == 0
    assert a1.with_[1][..., pad].abs().max() < 1e-12
    # A causal model attends to no later position.
    if name != "bert":
        assert torch.triu(a1.with_, diagonal=1).abs().max() < 1e-12


def test_llama_reads_grouped_query_heads_and_rotary_positions(saved):
    model = hf_model(saved["llama"], "llama", "sdpa")
    cfg = model.config
    assert cfg.num_key_value_heads < cfg.num_attention_heads  # grouped-query
    attn = model.model.layers[1].self_attn
    assert attn.k_proj.out_features < attn.q_proj.out_features
    x = batch(saved["llama"], TEXTS[:1])
    got = attention_patterns(model, x, None, None, ["model.layers.1.self_attn"])
    a = got["model.layers.1.self_attn"]
    assert a.family == "Llama" and a.heads == cfg.num_attention_heads
    torch.testing.assert_close(a.without, eager_attentions(saved["llama"], "llama", x)[1], **TOL)
    # The rotary positions matter: the same tokens shifted one place give another pattern.
    shifted = {k: v[:, 1:] for k, v in x.items()}
    moved = attention_patterns(model, shifted, None, None, ["model.layers.1.self_attn"])
    torch.testing.assert_close(moved["model.layers.1.self_attn"].without,
                               eager_attentions(saved["llama"], "llama", shifted)[1], **TOL)


def test_bert_attention_wrapper_is_read_through_its_self(saved):
    model = hf_model(saved["bert"], "bert", "sdpa")
    x = batch(saved["bert"], TEXTS)
    got = attention_patterns(model, x, None, None, ["bert.encoder.layer.1.attention"])
    a = got["bert.encoder.layer.1.attention"]
    assert a.module == "bert.encoder.layer.1.attention.self" and a.family == "BERT"
    torch.testing.assert_close(a.without, eager_attentions(saved["bert"], "bert", x)[1], **TOL)


def test_session_attention_on_an_hf_model_equals_eager(saved):
    folder = saved["gpt2"]
    s = Session.load(f"hf:{folder}", input_text="text:the cat sat on the mat")
    try:
        s.intervene("transformer.h.0", Clamp(LO, HI))
        got = s.attention("transformer.h.1.attn")
        assert isinstance(got, AttentionResult)
        x = s.last_result.inputs
    finally:
        s.close()
    x = dict(x) if isinstance(x, dict) else batch(folder, ["the cat sat on the mat"])
    a = got["transformer.h.1.attn"]
    torch.testing.assert_close(a.without, eager_attentions(folder, "gpt2", x)[1], **TOL)
    torch.testing.assert_close(a.with_, eager_attentions(folder, "gpt2", x, "transformer.h.0")[1],
                               **TOL)
    data = got.to_json_dict()["transformer.h.1.attn"]
    assert data["heads"] == 2 and len(data["tokens"]) == a.with_.shape[-1]
    assert torch.tensor(data["with"]).shape == a.with_[0].shape


def demo_probs(module, ids, clamp=False):
    """demo:lm's own softmax output (``blocks.1.attn.probs``), block 0 clamped by hand."""
    got = []
    hs = [module.blocks[1].attn.probs.register_forward_hook(lambda m, i, o: got.append(o.clone()))]
    if clamp:
        hs.append(module.blocks[0].register_forward_hook(clamp_output))
    try:
        with torch.no_grad():
            module(ids)
    finally:
        for h in hs:
            h.remove()
    return got[0]


def test_demo_lm_patterns_equal_its_own_softmax():
    prompt = "the cat sat on the "
    s = Session.load("demo:lm", input_text=f"text:{prompt}")
    try:
        s.intervene("blocks.0", Clamp(LO, HI))
        got = s.attention("blocks.1.attn", "blocks.0.attn")
        module = s.model.module
        ids = torch.tensor([CODEC.encode(prompt)])
        a = got["blocks.1.attn"]
        torch.testing.assert_close(a.without, demo_probs(module, ids), **TOL)
        torch.testing.assert_close(a.with_, demo_probs(module, ids, clamp=True), **TOL)
        assert (a.with_ - a.without).abs().max() > 1e-3
        assert list(got.layers) == ["blocks.1.attn", "blocks.0.attn"]
        assert len(got.tokens) == len(prompt)
        # The session's own analyse door gives the same.
        again = s.analyse(AttentionRequest(("blocks.1.attn",)))
        assert torch.equal(again["blocks.1.attn"].with_, a.with_)
    finally:
        s.close()


class MhaModel(nn.Module):
    """A linear layer, then self-attention with a causal mask and a padding mask."""

    def __init__(self, batch_first: bool, bias_kv: bool = False, zero_attn: bool = False,
                 kdim: int | None = None) -> None:
        super().__init__()
        self.pre = nn.Linear(8, 8)
        self.kin = nn.Linear(8, kdim) if kdim else None
        self.attn = nn.MultiheadAttention(8, 2, batch_first=batch_first, add_bias_kv=bias_kv,
                                          add_zero_attn=zero_attn, kdim=kdim, vdim=kdim)
        self.batch_first = batch_first

    def masks(self, x):
        t = x.shape[1]
        causal = torch.ones(t, t, dtype=torch.bool).triu(1)   # True: not allowed
        pad = torch.zeros(x.shape[0], t, dtype=torch.bool)
        pad[1, -2:] = True
        return causal, pad

    def forward(self, x, need_weights=False):
        h = self.pre(x)
        k = self.kin(x) if self.kin is not None else h
        causal, pad = self.masks(x)
        if not self.batch_first:
            h, k = h.transpose(0, 1), k.transpose(0, 1)
        out, w = self.attn(h, k, k, attn_mask=causal, key_padding_mask=pad,
                           need_weights=need_weights, average_attn_weights=False)
        return (out, w) if need_weights else out


@pytest.mark.parametrize("options", [dict(batch_first=True), dict(batch_first=False),
                                     dict(batch_first=True, bias_kv=True, zero_attn=True),
                                     dict(batch_first=True, kdim=6)])
def test_multihead_attention_equals_its_own_weights(options):
    torch.manual_seed(0)
    model = MhaModel(**options).eval()
    x = torch.randn(2, 5, 8)

    def weights(clamp):
        h = model.pre.register_forward_hook(lambda m, i, o: o.clamp(LO, HI)) if clamp else None
        try:
            with torch.no_grad():
                return model(x, need_weights=True)[1]
        finally:
            if h is not None:
                h.remove()

    got = attention_patterns(model, x, Plan(clamp={"pre": (LO, HI)}), None, ["attn"])["attn"]
    assert got.family == "nn.MultiheadAttention" and got.heads == 2
    torch.testing.assert_close(got.without, weights(False), **TOL)
    torch.testing.assert_close(got.with_, weights(True), **TOL)
    assert (got.with_ - got.without).abs().max() > 1e-3


def test_the_model_is_left_as_it_was_and_the_request_reads_text():
    lm = load_model("demo:lm")
    before = {k: v.clone() for k, v in lm.module.state_dict().items()}
    attention_patterns(lm.module, lm.example_input, Plan(clamp={"blocks.0": (LO, HI)}),
                       lm.meaning, ["blocks.0.attn"])
    after = lm.module.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)
    assert not any(m._forward_pre_hooks or m._forward_hooks for m in lm.module.modules())
    assert AttentionRequest("blocks.0.attn, blocks.1.attn").layers == ("blocks.0.attn",
                                                                         "blocks.1.attn")


def test_a_patch_from_another_prompt_equals_a_hand_patch():
    """A patch's source forward runs first; the pattern is the patched forward's."""
    lm = load_model("demo:lm")
    module = lm.module
    x = torch.tensor([CODEC.encode("the cat sat on the ")])
    source = torch.tensor([CODEC.encode("the dog sat on the ")])
    plan = Plan(interventions={"blocks.0": parse_intervention("patch:text:the dog sat on the ")})
    got = attention_patterns(module, x, plan, lm.meaning, ["blocks.1.attn"])["blocks.1.attn"]

    kept = []
    h = module.blocks[0].register_forward_hook(lambda m, i, o: kept.append(o.clone()))
    with torch.no_grad():
        module(source)
    h.remove()
    probs = []
    hs = [module.blocks[0].register_forward_hook(lambda m, i, o: kept[0]),
          module.blocks[1].attn.probs.register_forward_hook(lambda m, i, o: probs.append(o))]
    with torch.no_grad():
        module(x)
    for h in hs:
        h.remove()
    torch.testing.assert_close(got.with_, probs[0], **TOL)
    assert (got.with_ - got.without).abs().max() > 1e-3


def llama_relative(kind, folder):
    """A small Qwen 3 (q_norm/k_norm) or Gemma 2 (score soft-capping, sliding window, its own
    scaling) saved with the test tokenizer."""
    import transformers

    tok = hf_models.tokenizer()
    torch.manual_seed(0)
    common = dict(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                  num_attention_heads=4, num_key_value_heads=2, head_dim=8,
                  max_position_embeddings=64, pad_token_id=1)
    if kind == "qwen3":
        cfg = transformers.Qwen3Config(**common)
        model = transformers.Qwen3ForCausalLM(cfg)
    else:
        cfg = transformers.Gemma2Config(**common, attn_logit_softcapping=5.0, sliding_window=4,
                                        query_pre_attn_scalar=12)
        model = transformers.Gemma2ForCausalLM(cfg)
    with torch.no_grad():
        for m in model.modules():
            for child in ("q_proj", "k_proj"):
                if isinstance(getattr(m, child, None), nn.Linear):
                    getattr(m, child).weight *= 8
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder, type(model)


@pytest.mark.parametrize("kind", ["qwen3", "gemma2"])
def test_llama_family_relatives_equal_eager(tmp_path, kind):
    folder, cls = llama_relative(kind, tmp_path / kind)
    x = batch(folder, TEXTS)
    ref_model = cls.from_pretrained(folder, attn_implementation="eager").eval()
    with torch.no_grad():
        ref = ref_model(**x, output_attentions=True).attentions
    implementations = ["eager"] if kind == "gemma2" else ["sdpa", "eager"]  # Gemma 2: no sdpa
    for implementation in implementations:
        model = cls.from_pretrained(folder, attn_implementation=implementation).eval()
        layers = ["model.layers.0.self_attn", "model.layers.1.self_attn"]
        got = attention_patterns(model, x, None, None, layers)
        for i, layer in enumerate(layers):
            torch.testing.assert_close(got[layer].without, ref[i], **TOL)


def test_the_attention_modules_of_a_model_are_listed(saved):
    assert attention_modules(load_model("demo:lm").module) == ["blocks.0.attn", "blocks.1.attn"]
    assert attention_modules(hf_model(saved["bert"], "bert", "sdpa")) == [
        "bert.encoder.layer.0.attention.self", "bert.encoder.layer.1.attention.self"]
    assert attention_modules(hf_model(saved["llama"], "llama", "sdpa")) == [
        "model.layers.0.self_attn", "model.layers.1.self_attn"]
    assert attention_modules(MhaModel(batch_first=True)) == ["attn"]
