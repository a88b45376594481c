"""A Hugging Face model and its tokenizer, built in this Python session, opened as they are."""

from __future__ import annotations

from html import escape

import pytest
import torch

pytest.importorskip("transformers")

import hf_models  # noqa: E402  (tests/core is on sys.path)

from hookscope.core import Scale, Session  # noqa: E402
from hookscope.core.base.text_codec import readable  # noqa: E402


@pytest.fixture(scope="module")
def gpt2_and_tokenizer(tmp_path_factory):
    from transformers import AutoTokenizer, GPT2LMHeadModel

    folder = hf_models.gpt2(tmp_path_factory.mktemp("gpt2"))
    return GPT2LMHeadModel.from_pretrained(folder), AutoTokenizer.from_pretrained(folder)


def test_a_prompt_runs_through_the_tokenizer_and_reads_as_next_tokens(gpt2_and_tokenizer):
    model, tok = gpt2_and_tokenizer
    prompt = "the dog sat on the"
    s = Session.from_module(model, prompt, tokenizer=tok, timeout_s=120)
    try:
        assert s.model.module is model
        assert s.model.meaning.kind == "tokens" and s.model.meaning.field == "logits"
        ids = tok(prompt, return_tensors="pt")
        assert torch.equal(s.model.example_input["input_ids"], ids["input_ids"])
        s.capture("transformer.h.0.mlp")
        s.intervene("transformer.h.0.mlp", Scale(0.0))
        r = s.run(timeout_s=120)
        with torch.no_grad():
            want = model(**ids).logits
        assert torch.allclose(r.output_without.logits, want, atol=1e-6)
        html = r._repr_html_()
        last = tok.convert_ids_to_tokens([int(want[0, -1].argmax())])[0]
        assert "Next token" in html
        assert escape(readable(last)) in html  # the top next token without the plan, by name
        # a typed text: input goes through the same tokenizer
        s.set_input("text:a cat sat")
        r2 = s.run(timeout_s=120)
        assert r2.inputs["input_ids"][0].tolist() == tok("a cat sat")["input_ids"]
    finally:
        s.close()


def test_without_an_input_the_tokenizer_makes_the_default_prompt(gpt2_and_tokenizer):
    model, tok = gpt2_and_tokenizer
    s = Session.from_module(model, tokenizer=tok, timeout_s=120)
    try:
        from hookscope.core.model.live_model import DEFAULT_PROMPT

        assert s.model.example_input["input_ids"].tolist() == [tok(DEFAULT_PROMPT)["input_ids"]]
        assert s.run(timeout_s=120).output_with.logits.shape[-1] == len(tok)
    finally:
        s.close()
