"""Generation counts ``@pos=`` in the prompt: a patch at the prompt's last token stays
there at every step, with the KV cache and without, equal to a hand loop; the cached
generation equals the full loop for the kinds that act per position, and
``check_cache`` finds no step where they part."""

import pytest
import torch

from hookscope.core import Clamp, Patch, Plan, Scale, Zero, generate, load_model
from hookscope.core.plan.at import At
from hookscope.core.plan.directions import Add
from hookscope.core.plan.interventions import Noise
from hookscope.core.plan.steer_vector import SteeringVector

SOURCE = "the dog sat on the "


def _block_out(out):
    return out[0] if isinstance(out, tuple) else out


def _with_block(out, new):
    return (new,) + tuple(out[1:]) if isinstance(out, tuple) else new


def source_row(model, layer, ids, call):
    """``layer``'s output at the last position of a clean run on ``ids``."""
    got = []
    h = model.get_submodule(layer).register_forward_hook(
        lambda _m, _i, out: got.append(_block_out(out)[:, -1].clone()))
    try:
        with torch.no_grad():
            call(model, ids)
    finally:
        h.remove()
    return got[0]


def greedy_with_hook(model, ids, n, layer, hook, call):
    """``n`` greedy tokens by the whole-sequence loop, ``hook`` on ``layer``'s output at
    every step, removed afterwards."""
    h = model.get_submodule(layer).register_forward_hook(hook)
    try:
        out = []
        for _ in range(n):
            with torch.no_grad():
                tok = int(call(model, ids)[0, -1].argmax())
            out.append(tok)
            ids = torch.cat([ids, torch.tensor([[tok]])], 1)
        return out
    finally:
        h.remove()


def hand_patched(model, ids, n, layer, row, call, growing=False):
    """The whole sequence each step; the prompt's last position of ``layer`` replaced by
    ``row`` at every step (``growing``: the sequence's last token instead, as positions
    counted in the whole sequence would)."""
    last = ids.shape[1] - 1

    def hook(_m, _i, out):
        t = _block_out(out).clone()
        t[:, -1 if growing else last] = row
        return _with_block(out, t)

    return greedy_with_hook(model, ids, n, layer, hook, call)


def _demo():
    lm = load_model("demo:lm")
    x = torch.tensor([lm.meaning.codec.encode("the cat sat on the ")])
    return lm, x, x, (lambda m, i: m(i)), "blocks.1", "blocks.0"


@pytest.fixture(scope="module")
def gpt2(tmp_path_factory):
    pytest.importorskip("transformers", reason="the hf extra (transformers) is not installed")
    import hf_models

    lm = load_model(f"hf:{hf_models.gpt2(tmp_path_factory.mktemp('gpt2') / 'gpt2')}")
    x = lm.example_input
    call = lambda m, i: m(input_ids=i, attention_mask=torch.ones_like(i)).logits  # noqa: E731
    return lm, x, x["input_ids"], call, "transformer.h.1", "transformer.h.0"


@pytest.fixture(params=["demo:lm", "gpt2"])
def model(request):
    return _demo() if request.param == "demo:lm" else request.getfixturevalue("gpt2")


def test_patch_at_the_prompts_last_token_equals_a_hand_loop(model):
    lm, x, ids, call, layer, _ = model
    src_ids = torch.tensor([lm.meaning.codec.encode(SOURCE)])
    row = source_row(lm.module, layer, src_ids, call)
    want = hand_patched(lm.module, ids, 12, layer, row, call)
    plan = Plan().with_intervention(layer, Patch("text:" + SOURCE, at=At(positions=-1)))
    for cache in (True, False):
        g = generate(lm.module, x, plan, lm.meaning, 12, cache=cache)
        assert g.with_.ids == want, cache
    if layer == "blocks.1":  # demo:lm, trained: patching the growing last token says otherwise
        assert want != hand_patched(lm.module, ids, 12, layer, row, call, growing=True)


def test_hf_gpt2_uses_the_cache_and_demo_lm_says_why_not(model):
    lm, x, *_, layer, _ = model
    plan = Plan().with_intervention(layer, Scale(0.5, at=At(positions=-1)))
    g = generate(lm.module, x, plan, lm.meaning, 4)
    if lm.meaning.codec.__class__.__name__ == "CharCodec":
        assert not g.with_.cached and "past_key_values" in g.note
    else:
        assert g.with_.cached and g.without.cached and g.note == ""
    off = generate(lm.module, x, plan, lm.meaning, 4, cache=False)
    assert not off.with_.cached and "cache is off" in off.note


def _kinds(width):
    vec = SteeringVector("v", torch.linspace(-1.0, 1.0, width))
    return {"clamp": Clamp(-0.05, 0.05, at=At(positions="0:3")),
            "patch": Patch("text:" + SOURCE, at=At(positions=-1)),
            "zero": Zero(at=At(positions="-2,-1")),
            "add": Add(vec, 4.0, at=At(positions=-1)),
            "add-everywhere": Add(vec, 2.0),
            "clamp-everywhere": Clamp(-0.1, 0.1)}


@pytest.mark.parametrize("kind", ["clamp", "patch", "zero", "add", "add-everywhere",
                                  "clamp-everywhere"])
def test_cached_greedy_equals_the_full_loop(gpt2, kind):
    lm, x, ids, call, layer, early = gpt2
    iv = _kinds(lm.module.config.n_embd)[kind]
    plan = Plan().with_intervention(early, iv)
    cached = generate(lm.module, x, plan, lm.meaning, 16)
    full = generate(lm.module, x, plan, lm.meaning, 16, cache=False)
    assert cached.with_.cached and not full.with_.cached
    assert cached.with_.ids == full.with_.ids
    assert cached.without.ids == full.without.ids
    checked = generate(lm.module, x, plan, lm.meaning, 16, check_cache=True)
    assert checked.cache_check is not None
    assert checked.cache_check.without is None and checked.cache_check.with_ is None
    assert checked.cache_check.max_logit_diff < 1e-4
    assert checked.to_json_dict()["cache_check"]["with"] is None


def test_check_cache_on_both_models(model):
    lm, x, *_, layer, _ = model
    plan = Plan().with_intervention(layer, Patch("text:" + SOURCE, at=At(positions=-1)))
    g = generate(lm.module, x, plan, lm.meaning, 10, check_cache=True)
    if g.with_.cached:  # GPT-2 (that it caches: test_hf_gpt2_uses_the_cache_...)
        assert g.cache_check is not None
        assert g.cache_check.with_ is None and g.cache_check.without is None
    else:  # demo:lm has no cache: nothing to compare, and the note says so
        assert g.cache_check is None and "nothing to check" in g.note


def test_a_kind_that_mixes_positions_runs_the_full_loop_and_says_why(gpt2):
    lm, x, ids, call, layer, early = gpt2
    plan = Plan().with_intervention(early, Noise(0.5, 3))
    g = generate(lm.module, x, plan, lm.meaning, 5)
    assert g.without.cached and not g.with_.cached
    assert "does not act on each position alone" in g.note and early in g.note
    full = generate(lm.module, x, plan, lm.meaning, 5, cache=False)
    assert g.with_.ids == full.with_.ids


def test_a_position_past_the_prompt_is_refused_in_the_prompts_words():
    lm, x, *_ = _demo()
    plan = Plan().with_intervention("blocks.1", Scale(0.0, at=At(positions=x.shape[1])))
    with pytest.raises(Exception, match="counted in the prompt"):
        generate(lm.module, x, plan, lm.meaning, 3)


def hand_on_generated(model, ids, n, layer, factor, call):
    """The whole sequence each step; ``layer``'s output times ``factor`` at every position
    after the prompt (the generated tokens fed back), the prompt left alone."""
    prompt = ids.shape[1]

    def hook(_m, _i, out):
        t = _block_out(out).clone()
        t[:, prompt:] *= factor
        return _with_block(out, t)

    return greedy_with_hook(model, ids, n, layer, hook, call)


def test_pos_gen_acts_on_the_generated_tokens_only(model):
    lm, x, ids, call, layer, early = model
    plan = Plan().with_intervention(early, Scale(-3.0, at=At(positions="gen")))
    want = hand_on_generated(lm.module, ids, 10, early, -3.0, call)
    for cache in (True, False):
        g = generate(lm.module, x, plan, lm.meaning, 10, cache=cache)
        assert g.with_.ids == want, cache
        assert g.with_.ids[0] == g.without.ids[0]  # the first token comes from the prompt alone
    checked = generate(lm.module, x, plan, lm.meaning, 10, check_cache=True)
    assert (checked.cache_check is None) != checked.with_.cached
    assert checked.cache_check is None or checked.cache_check.with_ is None


def test_pos_gen_changes_nothing_in_a_single_run_and_is_for_positions_only():
    from hookscope.core import compare
    from hookscope.core.plan.at import parse_selector

    lm, x, *_ = _demo()
    plan = Plan().with_intervention("blocks.1", Scale(0.0, at=At(positions="gen")))
    res = compare(lm.module, x, plan)  # one run has no generated tokens
    assert not res.outputs_differ
    both = compare(lm.module, x, Plan().with_intervention("blocks.1",
                                                          Scale(0.0, at=At(positions="-1,gen"))))
    only_last = compare(lm.module, x, Plan().with_intervention("blocks.1",
                                                               Scale(0.0, at=At(positions=-1))))
    assert torch.equal(both.output_with, only_last.output_with) and both.outputs_differ
    with pytest.raises(Exception, match="for @pos= only"):
        parse_selector("gen", "heads")
    assert At(positions="-1,gen").suffix() == "@pos=-1,gen"


def test_llama_cached_equals_the_full_loop(tmp_path):
    """Rotary positions and grouped-query heads: the cache still equals the full loop."""
    pytest.importorskip("transformers", reason="the hf extra (transformers) is not installed")
    import hf_models

    lm = load_model(f"hf:{hf_models.llama(tmp_path / 'llama')}")
    x = lm.example_input
    plan = Plan().with_intervention("model.layers.0", Patch("text:" + SOURCE, at=At(positions=-1)))
    g = generate(lm.module, x, plan, lm.meaning, 8, check_cache=True)
    assert g.with_.cached and g.cache_check is not None
    assert g.cache_check.with_ is None and g.cache_check.without is None
    assert g.with_.ids == generate(lm.module, x, plan, lm.meaning, 8, cache=False).with_.ids


def test_the_exported_script_refuses_pos_gen():
    from hookscope.core import PlanError

    with pytest.raises(PlanError, match="pos=gen"):
        Scale(0.5, at=At(positions="gen")).to_torch_source()
    assert "aimed(" in Scale(0.5, at=At(positions=-1)).to_torch_source()
