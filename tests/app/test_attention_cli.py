"""`hookscope run --attention LAYER[,LAYER]`: the JSON parses and matches Session.attention
(and demo:lm's own softmax), the table names the strongest keys, mistakes are one line."""

import json

import pytest
import torch

from hookscope.app.cli import main
from hookscope.core import Clamp, Session

PROMPT = "the cat sat on the "


def run_cli(capsys, *argv):
    code = main(["run", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def own_softmax(module, prompt, block, clamp=None):
    """demo:lm's ``blocks.N.attn.probs`` output, block 0 clamped by a hand-written hook."""
    from hookscope.core.demos.demo_lm import CODEC

    got = []
    hs = [module.blocks[block].attn.probs.register_forward_hook(lambda m, i, o: got.append(o))]
    if clamp:
        hs.append(module.blocks[0].register_forward_hook(lambda m, i, o: o.clamp(*clamp)))
    try:
        with torch.no_grad():
            module(torch.tensor([CODEC.encode(prompt)]))
    finally:
        for h in hs:
            h.remove()
    return got[0][0]


def test_attention_json_matches_the_session_and_the_model(capsys):
    code, out, err = run_cli(capsys, "demo:lm", "--input", f"text:{PROMPT}", "--intervene",
                             "blocks.0=clamp:-0.1:0.1", "--attention", "blocks.1.attn,blocks.0.attn",
                             "--json")
    assert code == 0 and err == ""
    data = json.loads(out)["attention"]
    assert list(data) == ["blocks.1.attn", "blocks.0.attn"]
    s = Session.load("demo:lm", input_text=f"text:{PROMPT}")
    try:
        s.intervene("blocks.0", Clamp(-0.1, 0.1))
        ref = s.attention("blocks.1.attn", "blocks.0.attn")
        module = s.model.module
        for layer, a in ref.layers.items():
            d = data[layer]
            assert d["heads"] == 4 and d["tokens"] == ref.tokens and len(d["tokens"]) == len(PROMPT)
            for key, t in (("without", a.without[0]), ("with", a.with_[0])):
                got = torch.tensor(d[key])
                assert got.shape == (4, len(PROMPT), len(PROMPT))
                torch.testing.assert_close(got, t, atol=1e-6, rtol=0)  # rounded to 6 places
        own = own_softmax(module, PROMPT, 1)
        own_with = own_softmax(module, PROMPT, 1, clamp=(-0.1, 0.1))
    finally:
        s.close()
    torch.testing.assert_close(torch.tensor(data["blocks.1.attn"]["without"]), own, atol=1e-5, rtol=0)
    torch.testing.assert_close(torch.tensor(data["blocks.1.attn"]["with"]), own_with, atol=1e-5,
                               rtol=0)
    assert data["blocks.1.attn"]["with"] != data["blocks.1.attn"]["without"]


def test_attention_table(capsys):
    code, out, _ = run_cli(capsys, "demo:lm", "--input", f"text:{PROMPT}", "--attention",
                           "blocks.1.attn", "--intervene", "blocks.0=zero")
    assert code == 0
    assert "attention at blocks.1.attn (demo:lm, 4 heads" in out
    assert out.count("  head ") == 4 and "max |change|" in out


def test_the_analyse_command_gives_the_same(capsys):
    code = main(["analyse", "attention", "demo:lm", "--input", f"text:{PROMPT}",
                 "--param", "layers=blocks.1.attn", "--intervene", "blocks.0=scale:0.5"])
    out, err = capsys.readouterr()
    assert code == 0, err
    by_analyse = json.loads(out)
    code, out, _ = run_cli(capsys, "demo:lm", "--input", f"text:{PROMPT}", "--attention",
                           "blocks.1.attn", "--intervene", "blocks.0=scale:0.5", "--json")
    assert code == 0 and json.loads(out)["attention"] == by_analyse
    code = main(["analyse", "attention", "demo:lm"])
    err = capsys.readouterr().err
    assert code == 2 and "attention needs layers: give --param layers=VALUE" in err


@pytest.mark.parametrize("argv, words", [
    (["--attention", "blocks.1.mlp"], "'blocks.1.mlp' (Sequential) is not an attention module"),
    (["--attention", "blocks.9.attn"], "the model has no layer 'blocks.9.attn'"),
    (["--attention", ","], "name at least one attention module"),
    (["--attention", "blocks.1.attn", "--intervene", "blocks.1.attn.qkv=zero"],
     "the intervention on blocks.1.attn.qkv acts inside the attention"),
])
def test_attention_mistakes_are_one_line(capsys, argv, words):
    code, out, err = run_cli(capsys, "demo:lm", *argv)
    assert code == 2 and err.count("\n") == 1 and words in err and "Traceback" not in err
