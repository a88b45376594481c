"""Generation with interventions equals a hand-written loop with the same hook, on
demo:lm and a small Hugging Face GPT-2; sampling uses the same seed for both."""

import pytest
import torch

from hookscope.core import Plan, PlanError, Scale, Session, Zero, generate, load_model


def hand_generate(model, ids, n, layer=None, change=None, call=None, temperature=0.0, seed=0):
    """A plain loop: the whole sequence each step, a forward hook for the intervention."""
    call = call or (lambda m, x: m(x))
    handle = (model.get_submodule(layer).register_forward_hook(
        lambda _m, _i, out: ((change(out[0]),) + tuple(out[1:]) if isinstance(out, tuple)
                             else change(out))) if layer else None)
    gen = torch.Generator().manual_seed(seed)
    try:
        out = []
        for _ in range(n):
            with torch.no_grad():
                logits = call(model, ids)[0, -1].float()
            if temperature > 0:
                tok = int(torch.multinomial(torch.softmax(logits / temperature, -1), 1, generator=gen))
            else:
                tok = int(logits.argmax())
            out.append(tok)
            ids = torch.cat([ids, torch.tensor([[tok]])], 1)
        return out
    finally:
        if handle is not None:
            handle.remove()


def test_demo_lm_greedy_equals_hand_loop():
    lm = load_model("demo:lm")
    x = torch.tensor([lm.meaning.codec.encode("the cat sat on the ")])
    plan = Plan().with_intervention("blocks.0", Scale(0.2))
    g = generate(lm.module, x, plan, lm.meaning, 20)
    assert g.without.ids == hand_generate(lm.module, x, 20)
    assert g.with_.ids == hand_generate(lm.module, x, 20, "blocks.0", lambda t: t * 0.2)
    assert g.without.text == lm.meaning.codec.decode(g.without.ids)
    first = next(k for k, (a, b) in enumerate(zip(g.without.ids, g.with_.ids)) if a != b)
    assert g.first_divergence == first
    js = g.to_json_dict()
    assert js["with"]["ids"] == g.with_.ids and js["first_divergence"] == first


def test_sampling_uses_the_same_seed_for_both():
    lm = load_model("demo:lm")
    x = lm.example_input
    g = generate(lm.module, x, Plan().with_intervention("blocks.1", Scale(0.5)), lm.meaning, 15,
                 temperature=1.5, seed=7)
    assert g.without.ids == hand_generate(lm.module, x, 15, temperature=1.5, seed=7)
    assert g.with_.ids == hand_generate(lm.module, x, 15, "blocks.1", lambda t: t * 0.5,
                                        temperature=1.5, seed=7)
    # An empty plan: both continuations are the same draw.
    same = generate(lm.module, x, Plan(), lm.meaning, 15, temperature=1.5, seed=7)
    assert same.without.ids == same.with_.ids and same.first_divergence is None


def test_refusals():
    lm = load_model("demo:lm")
    with pytest.raises(PlanError, match="1..4096"):
        generate(lm.module, lm.example_input, Plan(), lm.meaning, 0)
    with pytest.raises(PlanError, match="temperature"):
        generate(lm.module, lm.example_input, Plan(), lm.meaning, 3, temperature=-1.0)
    cnn = load_model("demo:cnn")
    with pytest.raises(PlanError, match="token ids"):
        generate(cnn.module, cnn.example_input, Plan(), cnn.meaning, 3)


def test_session_generate():
    s = Session.load("demo:lm")
    try:
        s.intervene("blocks.1", Zero())
        g = s.generate(10)
        lm = s.model
        assert g.with_.ids == hand_generate(lm.module, lm.example_input, 10, "blocks.1",
                                            torch.zeros_like)
    finally:
        s.close()


def test_hf_gpt2_equals_hand_loop(tmp_path):
    pytest.importorskip("transformers", reason="the hf extra (transformers) is not installed")
    import hf_models

    lm = load_model(f"hf:{hf_models.gpt2(tmp_path / 'gpt2')}")
    x = lm.example_input
    plan = Plan().with_intervention("transformer.h.0", Scale(-20.0))
    g = generate(lm.module, x, plan, lm.meaning, 20)
    ids = x["input_ids"]
    call = lambda m, i: m(input_ids=i, attention_mask=torch.ones_like(i)).logits  # noqa: E731
    assert g.without.ids == hand_generate(lm.module, ids, 20, call=call)
    assert g.with_.ids == hand_generate(lm.module, ids, 20, "transformer.h.0", lambda t: t * -20.0,
                                        call=call)
    assert g.without.ids != g.with_.ids


def test_session_generate_on_a_model_without_tokens_raises():
    s = Session.load("demo:cnn")
    try:
        with pytest.raises(PlanError, match="token ids"):
            s.generate(3)
        assert s.run() is not None  # the session stays usable
    finally:
        s.close()
