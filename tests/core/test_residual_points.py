"""``resid_pre.N`` / ``resid_mid.N`` / ``resid_post.N``: block N's input, the residual between
attention and MLP, and the block's output by name, for the families whose blocks are known;
patterns over them; unknown families and blocks refused with what to use."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from hookscope.core import Plan, PlanError, compare, load_model, parse_input
from hookscope.core.analyses import sweep
from hookscope.core.plan import parse_intervention
from hookscope.core.plan.path_patterns import expand_paths

pytest.importorskip("transformers", reason="the hf extra (transformers) is not installed")
import hf_models  # noqa: E402  (tests/core is on sys.path)

PROMPT = "the cat sat on the"
SOURCE = "the cat sat on a"


@pytest.fixture(scope="module")
def gpt2(tmp_path_factory):
    return load_model(f"hf:{hf_models.gpt2(tmp_path_factory.mktemp('resid') / 'gpt2')}")


@pytest.fixture(scope="module")
def llama(tmp_path_factory):
    return load_model(f"hf:{hf_models.llama(tmp_path_factory.mktemp('resid') / 'llama')}")


def test_resid_pre_grid_equals_the_hand_written_list_of_outputs(gpt2):
    """resid_pre.L is block L's input: the output of transformer.drop for L = 0 and of block
    L-1 after, the list a patching grid had to be written with by hand."""
    codec = gpt2.meaning.codec
    x = parse_input(f"text:{PROMPT}", gpt2.example_input, codec)
    tpl = {"{layer}": f"patch:text:{SOURCE}@pos={{pos}}"}
    metric = "logit-diff:' dog','cat'"
    named = sweep(gpt2.module, x, {"layer": "resid_pre.*", "pos": "all"}, tpl, metric,
                  meaning=gpt2.meaning, batch=False)
    by_hand = sweep(gpt2.module, x, {"layer": "transformer.drop,transformer.h.0", "pos": "all"},
                    tpl, metric, meaning=gpt2.meaning, batch=False)
    assert named.axes["layer"] == ["resid_pre.0", "resid_pre.1"]
    np.testing.assert_array_equal(named.values, by_hand.values)
    assert np.ptp(named.values) > 0
    est = sweep(gpt2.module, x, {"layer": "resid_pre.*", "pos": "all"}, tpl, metric,
                meaning=gpt2.meaning, estimate=True)
    assert np.isfinite(est.estimates).all()


def test_capture_by_name_is_the_block_input_and_output(gpt2, llama):
    for lm, blocks in ((gpt2, "transformer.h"), (llama, "model.layers")):
        x = lm.example_input
        got = []
        b1 = lm.module.get_submodule(f"{blocks}.1")
        h1 = b1.register_forward_pre_hook(lambda m, args: got.append(args[0].detach().clone()))
        try:
            r = compare(lm.module, x, Plan(capture=("resid_pre.1", "resid_post.1")))
        finally:
            h1.remove()
        assert set(r.captures) == {f"{blocks}.1:input", f"{blocks}.1"}
        assert torch.equal(r.captures[f"{blocks}.1:input"][0].tensor, got[0])
        assert expand_paths("resid_post.*", lm.module) == ["resid_post.0", "resid_post.1"]


def test_unknown_families_and_blocks_are_refused_with_what_to_use(gpt2):
    with pytest.raises(PlanError, match="resid_pre.0 .. resid_pre.1"):
        Plan(capture=("resid_pre.9",)).resolve(gpt2.module)
    cnn = load_model("demo:cnn")
    with pytest.raises(PlanError, match="BLOCK:input"):
        Plan(capture=("resid_mid.0",)).resolve(cnn.module)


def _mid_by_norm(lm, norm, x):
    got = []
    h = lm.module.get_submodule(norm).register_forward_pre_hook(
        lambda m, args: got.append(args[0].detach().clone()))
    try:
        with torch.no_grad():
            lm.module(**x) if isinstance(x, dict) else lm.module(x)
    finally:
        h.remove()
    return got[0]


def test_resid_mid_capture_is_the_second_norms_input(gpt2, llama):
    lm_demo = load_model("demo:lm")
    for lm, norm in ((gpt2, "transformer.h.1.ln_2"), (llama, "model.layers.1.post_attention_layernorm"),
                     (lm_demo, "blocks.1.ln2")):
        x = lm.example_input
        r = compare(lm.module, x, Plan(capture=("resid_mid.1",)))
        want = _mid_by_norm(lm, norm, x)
        torch.testing.assert_close(r.captures["resid_mid.1"][0].tensor, want, rtol=1e-6, atol=1e-6)
    assert expand_paths("resid_mid.*", gpt2.module) == ["resid_mid.0", "resid_mid.1"]


def test_setting_resid_mid_changes_the_residual_and_the_mlp_alike(gpt2):
    """Patched at every position from the source, the run after block N is the source's
    (its output equals the source run's); at one position, the same as changing the MLP's
    input and adding the change to the MLP's output, written by hand."""
    codec = gpt2.meaning.codec
    x = parse_input(f"text:{PROMPT}", gpt2.example_input, codec)
    src = parse_input(f"text:{SOURCE}", gpt2.example_input, codec)
    r = compare(gpt2.module, x, Plan(interventions={"resid_mid.1": parse_intervention(f"patch:text:{SOURCE}")}),
                codec=codec)
    with torch.no_grad():
        source_out = gpt2.module(**src).logits
    torch.testing.assert_close(r.output_with.logits, source_out, rtol=1e-5, atol=1e-5)
    assert not torch.allclose(r.output_without.logits, source_out, atol=1e-3)
    p = 6  # the position where the two prompts differ
    r = compare(gpt2.module, x, Plan(interventions={"resid_mid.0": parse_intervention(
        f"patch:text:{SOURCE}@pos={p}")}),
                codec=codec)
    src_mid = _mid_by_norm(gpt2, "transformer.h.0.ln_2", src)
    delta = {}

    def norm_input(m, args):
        a = args[0].clone()
        a[:, p] = src_mid[:, p]
        delta["d"] = a - args[0]
        return (a, *args[1:])

    h1 = gpt2.module.get_submodule("transformer.h.0.ln_2").register_forward_pre_hook(norm_input)
    h2 = gpt2.module.get_submodule("transformer.h.0.mlp").register_forward_hook(
        lambda m, a, out: out + delta["d"])
    try:
        with torch.no_grad():
            want = gpt2.module(**x).logits
    finally:
        h1.remove()
        h2.remove()
    torch.testing.assert_close(r.output_with.logits, want, rtol=1e-5, atol=1e-5)
    assert not torch.allclose(r.output_with.logits, r.output_without.logits, atol=1e-4)


def test_resid_mid_estimate_equals_hand_written_attribution(gpt2):
    codec = gpt2.meaning.codec
    x = parse_input(f"text:{PROMPT}", gpt2.example_input, codec)
    src = parse_input(f"text:{SOURCE}", gpt2.example_input, codec)
    metric = "logit-diff:' dog','cat'"
    res = sweep(gpt2.module, x, {"pos": "all"}, {"resid_mid.1": f"patch:text:{SOURCE}@pos={{pos}}"},
                metric, meaning=gpt2.meaning, estimate=True, verify=2)
    (a_id,), (b_id,) = codec.encode(" dog"), codec.encode("cat")
    kept = {}

    def add_leaf(m, args, out):  # hook_resid_mid's gradient: a zero leaf on what is added
        kept["z"] = torch.zeros_like(out[0], requires_grad=True)
        return (out[0] + kept["z"], *out[1:])

    h = gpt2.module.get_submodule("transformer.h.1.attn").register_forward_hook(add_leaf)
    try:
        with torch.enable_grad():
            out = gpt2.module(**x).logits
            m = out[0, -1, a_id].double() - out[0, -1, b_id].double()
            (g,) = torch.autograd.grad(m, [kept["z"]])
    finally:
        h.remove()
    clean_mid = _mid_by_norm(gpt2, "transformer.h.1.ln_2", x)
    src_mid = _mid_by_norm(gpt2, "transformer.h.1.ln_2", src)
    for p in range(clean_mid.shape[1]):
        want = float(m.detach()) + float((g[0, p].double() * (src_mid[0, p] - clean_mid[0, p]).double()).sum())
        assert res.estimates[p] == pytest.approx(want, rel=1e-5, abs=1e-6)
    exact = sweep(gpt2.module, x, {"pos": "all"}, {"resid_mid.1": f"patch:text:{SOURCE}@pos={{pos}}"},
                  metric, meaning=gpt2.meaning, batch=False)
    for c, v in zip(res.verified["cells"], res.verified["values"]):
        assert v == exact.values[tuple(c)]
