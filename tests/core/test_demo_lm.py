"""demo:lm ships small, has its own tokenizer, and learned what its training data says."""

import torch

from hookscope.core import Plan, compare, load_model, parse_input
from hookscope.core.demos.demo_lm import CODEC, LM_WEIGHTS, _resource, lm_sample
from hookscope.core.base.meaning import TOKENS
from hookscope.resources.train_lm import SUBJECTS


def next_char(model, ids):
    with torch.no_grad():
        return CODEC.decode([int(model(ids).argmax(-1)[0, -1])])


def test_ships_small_with_its_tokenizer_and_prompt():
    assert len(_resource(LM_WEIGHTS).read_bytes()) < 1_000_000
    lm = load_model("demo:lm")
    assert lm.meaning.kind == TOKENS and lm.meaning.codec is CODEC
    assert lm.example_input.tolist() == [CODEC.encode(lm_sample()["prompt"])]
    assert CODEC.decode(lm.example_input[0].tolist()) == lm_sample()["prompt"]


def test_text_inputs_predict_the_place_of_each_subject():
    lm = load_model("demo:lm")
    for subject, (place, _) in SUBJECTS.items():
        x = parse_input(f"text:the {subject} sat on the ", lm.example_input, lm.meaning.codec)
        assert next_char(lm.module, x) == place[0], subject


def test_patching_the_subject_from_the_other_prompt_moves_the_prediction():
    lm = load_model("demo:lm")
    sample = lm_sample()
    a = parse_input("text:" + sample["prompt"], lm.example_input, CODEC)
    b = parse_input("text:" + sample["other"], lm.example_input, CODEC)
    assert a.shape == b.shape and next_char(lm.module, a) != next_char(lm.module, b)
    with torch.no_grad():
        other = {}
        h = lm.module.blocks[0].register_forward_hook(lambda m, i, o: other.setdefault("o", o))
        lm.module(b)
        h.remove()
        subject = slice(4, None)  # from the subject on ("the " + three letters ...)

        def patch(_m, _i, out):
            out = out.clone()
            out[:, subject] = other["o"][:, subject]
            return out

        h = lm.module.blocks[0].register_forward_hook(patch)
        try:
            patched = next_char(lm.module, a)
        finally:
            h.remove()
    assert patched == next_char(lm.module, b)


def test_clamping_attention_changes_the_next_token_scores():
    lm = load_model("demo:lm")
    r = compare(lm.module, lm.example_input,
                Plan(capture=["blocks.1.attn.probs"], clamp={"blocks.1.attn": (-0.01, 0.01)}))
    assert r.outputs_differ and r.output_with.shape == (1, lm.example_input.shape[1], len(CODEC.alphabet))
    assert r.captures["blocks.1.attn.probs"][0].stats.shape[-1] == lm.example_input.shape[1]
