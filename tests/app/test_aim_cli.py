"""``hookscope run`` with the ``@pos=``/``@heads=`` suffix and text source inputs, on demo:lm
and a small Hugging Face GPT-2: the printed numbers equal a hand-written hook's."""

import json
import sys

import numpy as np
import pytest
import torch

from hookscope.app.cli import main
from hookscope.core import load_model
from hookscope.core.model.inputs import parse_input

PROMPT, OTHER = "the cat sat on the ", "the dog sat on the "


def cli_json(argv, capsys):
    assert main(["run", *argv, "--json", "--full-output"]) == 0
    return json.loads(capsys.readouterr().out)


def logits(out):
    return out.logits if hasattr(out, "logits") else out


def hand(spec, prompt, hooks):
    """The model's output on ``prompt`` with plain hooks ``(layer, hook, pre)``."""
    lm = load_model(spec)
    x = parse_input("text:" + prompt, lm.example_input, lm.meaning.codec)
    handles = [lm.module.get_submodule(p).register_forward_pre_hook(h) if pre
               else lm.module.get_submodule(p).register_forward_hook(h) for p, h, pre in hooks]
    try:
        with torch.no_grad():
            return logits(lm.module(**x) if isinstance(x, dict) else lm.module(x))
    finally:
        for h in handles:
            h.remove()


def hidden(o):
    return o[0] if isinstance(o, tuple) else o


def last_position_patch(spec, layer, source_prompt):
    got = []
    hand(spec, source_prompt, [(layer, lambda m, a, o: got.append(hidden(o).clone()), False)])

    def hook(m, a, o):
        h = hidden(o).clone()
        h[:, -1] = got[0][:, -1]
        return (h, *o[1:]) if isinstance(o, tuple) else h
    return hook


def heads_zeroed(n, heads):
    def hook(m, a):
        h = a[0].clone()
        h.view(*h.shape[:-1], n, -1)[..., heads, :] = 0
        return (h,)
    return hook


@pytest.fixture(scope="module")
def gpt2(tmp_path_factory):
    pytest.importorskip("transformers", reason="the hf extra (transformers) is not installed")
    sys.path.insert(0, str(__import__("pathlib").Path(__file__).parents[1] / "core"))
    import hf_models

    return f"hf:{hf_models.gpt2(tmp_path_factory.mktemp('gpt2') / 'g')}"


def test_prompt_to_prompt_and_heads_on_demo_lm(capsys):
    got = cli_json(["demo:lm", "--input", "text:" + PROMPT, "--intervene", "blocks.1=patch@pos=-1",
                    "--source-input", "text:" + OTHER], capsys)
    want = hand("demo:lm", PROMPT, [("blocks.1", last_position_patch("demo:lm", "blocks.1", OTHER), False)])
    np.testing.assert_array_equal(np.asarray(got["output_with"], dtype=np.float32),
                                  want.flatten().numpy())
    got = cli_json(["demo:lm", "--input", "text:" + PROMPT, "--intervene",
                    "blocks.0.attn=zero@heads=0,3"], capsys)
    want = hand("demo:lm", PROMPT, [("blocks.0.attn.proj", heads_zeroed(4, [0, 3]), True)])
    np.testing.assert_array_equal(np.asarray(got["output_with"], dtype=np.float32),
                                  want.flatten().numpy())


def test_prompt_to_prompt_and_heads_on_gpt2(gpt2, capsys):
    other = "a dog sat on the log and the"
    got = cli_json([gpt2, "--input", "text:the cat sat on the", "--intervene",
                    "transformer.h.1=patch@pos=last", "--source-input", "text:" + other], capsys)
    want = hand(gpt2, "the cat sat on the",
                [("transformer.h.1", last_position_patch(gpt2, "transformer.h.1", other), False)])
    np.testing.assert_array_equal(np.asarray(got["output_with"], dtype=np.float32),
                                  want.flatten().numpy())
    got = cli_json([gpt2, "--input", "text:the cat sat on the", "--intervene",
                    "transformer.h.0.attn=zero@heads=1@pos=-1"], capsys)

    def pre(m, a):
        h = a[0].clone()
        h.view(*h.shape[:-1], 2, -1)[:, -1, 1, :] = 0
        return (h,)
    want = hand(gpt2, "the cat sat on the", [("transformer.h.0.attn.c_proj", pre, True)])
    np.testing.assert_array_equal(np.asarray(got["output_with"], dtype=np.float32),
                                  want.flatten().numpy())
