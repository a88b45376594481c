"""The logit lens equals a hand computation: each block's output through the model's own
final norm and unembedding, with a plain forward hook for the intervention."""

import pytest
import torch

from hookscope.core import Plan, PlanError, Scale, Session, Zero, load_model
from hookscope.core.analyses.logit_lens import find_lens_head, logit_lens


def first(out):
    return out[0] if isinstance(out, tuple) else out


def hand_lens(model, x, blocks, norm, unembed, edit_layer=None, edit=None):
    """Probabilities (rows, positions, vocab) of the first block's input (the embeddings),
    then of each block's output, batch row 0."""
    kept, handles = {}, []

    def entering(_m, args, kwargs):
        kept["input"] = (args[0] if args else kwargs["hidden_states"]).detach().clone()

    def keep(path):
        def hook(_m, _i, out):
            kept[path] = first(out).detach().clone()
        return hook

    def change(_m, _i, out):
        if isinstance(out, tuple):
            return (edit(out[0]),) + tuple(out[1:])
        return edit(out)

    try:
        if edit_layer is not None:
            handles.append(model.get_submodule(edit_layer).register_forward_hook(change))
        for b in blocks:
            handles.append(model.get_submodule(b).register_forward_hook(keep(b)))
        handles.append(model.get_submodule(blocks[0]).register_forward_pre_hook(
            entering, with_kwargs=True))
        with torch.no_grad():
            model(**x) if isinstance(x, dict) else model(x)
            n, u = model.get_submodule(norm), model.get_submodule(unembed)
            return torch.stack([torch.softmax(u(n(kept[b][0])).float(), -1)
                                for b in ["input", *blocks]])
    finally:
        for h in handles:
            h.remove()


def check(lens, probs_without, probs_with, target):
    for grid_top, grid_p, grid_t, probs in (
            (lens.top_without, lens.prob_without, lens.target_prob_without, probs_without),
            (lens.top_with, lens.prob_with, lens.target_prob_with, probs_with)):
        p, i = probs.max(-1)
        assert grid_top == i.tolist()
        assert torch.allclose(torch.tensor(grid_p), p, atol=1e-6)
        assert torch.allclose(torch.tensor(grid_t), probs[..., target], atol=1e-6)


def test_demo_lm_lens_equals_hand_computation():
    lm = load_model("demo:lm")
    x = lm.example_input
    plan = Plan().with_intervention("blocks.0", Scale(0.3))
    lens = logit_lens(lm.module, x, plan, lm.meaning, target="m")
    blocks = ["blocks.0", "blocks.1"]
    without = hand_lens(lm.module, x, blocks, "ln_f", "head")
    with_ = hand_lens(lm.module, x, blocks, "ln_f", "head", "blocks.0", lambda t: t * 0.3)
    tid = lm.meaning.codec.encode("m")[0]
    assert lens.layers == ["blocks.0:input", *blocks] and lens.target_id == tid
    assert len(lens.positions) == x.shape[1]
    check(lens, without, with_, tid)
    assert lens.top_with != lens.top_without  # the scale changed what the blocks predict
    # The embedding row comes before the intervention: the same without and with.
    assert lens.top_with[0] == lens.top_without[0]
    # The last block's row is the model's own prediction.
    with torch.no_grad():
        logits = lm.module(x)[0]
    assert lens.top_without[-1] == logits.argmax(-1).tolist()
    js = lens.to_json_dict()
    assert set(js) >= {"layers", "positions", "top_without", "top_with", "prob_without",
                       "prob_with"}
    assert js["top_without"][-1][-1] == lm.meaning.codec.token_strings([lens.top_without[-1][-1]])[0]


def test_session_lens_waits_and_uses_the_plan():
    s = Session.load("demo:lm")
    try:
        s.intervene("blocks.1", Zero())
        lens = s.lens(target="m")
        lm = s.model
        with_ = hand_lens(lm.module, lm.example_input, ["blocks.0", "blocks.1"], "ln_f", "head",
                          "blocks.1", torch.zeros_like)
        assert lens.top_with == with_.argmax(-1).tolist()
        assert s.plan.capture == ()  # the lens's captures never enter the person's plan
    finally:
        s.close()


def test_named_head_and_refusals():
    lm = load_model("demo:lm")
    head = find_lens_head(lm.module, "ln_f,head")
    assert head.blocks == ("blocks.0", "blocks.1") and head.norm == "ln_f"
    assert find_lens_head(lm.module, ",head").norm is None
    with pytest.raises(PlanError, match="no layer 'nope'"):
        find_lens_head(lm.module, "nope,head")
    with pytest.raises(PlanError, match="NORM,UNEMBED"):
        find_lens_head(lm.module, "ln_f")
    with pytest.raises(PlanError, match="2 tokens"):
        logit_lens(lm.module, lm.example_input, Plan(), lm.meaning, target="ab")
    plain = torch.nn.Sequential(torch.nn.Linear(2, 2))
    with pytest.raises(PlanError, match="--lens-head"):
        find_lens_head(plain)


@pytest.mark.parametrize("arch", ["gpt2", "llama"])
def test_hf_lens_equals_hand_computation(tmp_path, arch):
    pytest.importorskip("transformers", reason="the hf extra (transformers) is not installed")
    import hf_models

    folder = getattr(hf_models, arch)(tmp_path / arch)
    lm = load_model(f"hf:{folder}")
    x = lm.example_input
    prefix, norm = ("transformer.h", "transformer.ln_f") if arch == "gpt2" else ("model.layers", "model.norm")
    blocks = [f"{prefix}.{i}" for i in range(2)]
    plan = Plan().with_intervention(blocks[0], Scale(2.0))
    lens = logit_lens(lm.module, x, plan, lm.meaning, target="#5")
    without = hand_lens(lm.module, x, blocks, norm, "lm_head")
    with_ = hand_lens(lm.module, x, blocks, norm, "lm_head", blocks[0], lambda t: t * 2.0)
    assert lens.layers == [f"{prefix}.0:input", *blocks]
    check(lens, without, with_, 5)
    with torch.no_grad():
        logits = lm.module(**x).logits[0] if isinstance(x, dict) else lm.module(x).logits[0]
    assert lens.top_without[-1] == logits.argmax(-1).tolist()


def test_the_embedding_row_sees_an_intervention_before_block_0():
    """An intervention on the token embedding changes the lens's first row (block 0's input),
    as a hand-written hook computes it; a patch's source forward does not take its place."""
    from hookscope.core import At, Patch

    lm = load_model("demo:lm")
    x = lm.example_input
    blocks = ["blocks.0", "blocks.1"]
    plan = (Plan().with_intervention("embed", Scale(-1.5))
            .with_intervention("blocks.1", Patch("text:the dog sat on the ", at=At(positions=-1))))
    lens = logit_lens(lm.module, x, plan, lm.meaning, target="m")
    without = hand_lens(lm.module, x, blocks, "ln_f", "head")
    assert lens.layers[0] == "blocks.0:input"
    p, i = without[0].max(-1)
    assert lens.top_without[0] == i.tolist()
    assert torch.allclose(torch.tensor(lens.prob_without[0]), p, atol=1e-6)
    with_ = hand_lens(lm.module, x, blocks, "ln_f", "head", "embed", lambda t: t * -1.5)
    p, i = with_[0].max(-1)
    assert lens.top_with[0] == i.tolist() != lens.top_without[0]
    assert torch.allclose(torch.tensor(lens.prob_with[0]), p, atol=1e-6)
