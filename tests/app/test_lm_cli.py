"""`hookscope run --lens logit`: the grid in --json and as a table; mistakes are one line."""

import json
import sys
from pathlib import Path

import pytest

from hookscope.app.cli import main
from hookscope.core import Plan, Scale, load_model, logit_lens


def run_cli(capsys, *argv):
    code = main(["run", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_lens_json_equals_the_core_lens(capsys):
    code, out, err = run_cli(capsys, "demo:lm", "--input", "text:the cat sat on the ",
                             "--intervene", "blocks.0=scale:0.3", "--lens", "logit",
                             "--lens-token", "m", "--json")
    assert code == 0 and err == ""
    lens = json.loads(out)["lens"]
    lm = load_model("demo:lm")
    x = lm.meaning.codec.encode("the cat sat on the ")
    import torch

    ref = logit_lens(lm.module, torch.tensor([x]), Plan().with_intervention("blocks.0", Scale(0.3)),
                     lm.meaning, target="m")
    assert lens["layers"] == ["blocks.0:input", "blocks.0", "blocks.1"]
    assert lens["positions"] == lm.meaning.codec.token_strings(x)
    assert lens["top_id_without"] == ref.top_without and lens["top_id_with"] == ref.top_with
    assert lens["prob_with"] == [[round(v, 6) for v in row] for row in ref.prob_with]
    assert lens["top_with"][2][-1] == ref.token(ref.top_with[2][-1])
    assert lens["target"]["token"] == "m"


def test_lens_table(capsys):
    code, out, _ = run_cli(capsys, "demo:lm", "--lens", "logit", "--intervene", "blocks.1=zero")
    assert code == 0
    assert "logit lens" in out and "blocks.1" in out and "->" in out


@pytest.mark.parametrize("argv, words", [
    (["demo:cnn", "--lens", "logit"], "--lens-head"),
    (["demo:lm", "--lens", "logit", "--lens-head", "ln_f"], "NORM,UNEMBED"),
    (["demo:lm", "--lens", "logit", "--lens-token", "xyz"], "3 tokens"),
    (["demo:lm", "--lens-token", "m"], "go with --lens logit"),
    (["demo:lm", "--lens", "tuned"], "invalid choice"),
])
def test_lens_mistakes_are_one_line(capsys, argv, words):
    code, out, err = run_cli(capsys, *argv)
    assert code == 2 and words in err and err.count("\n") == 1 and "Traceback" not in err


def test_generate_json_equals_the_core_loop(capsys):
    from hookscope.core import generate

    code, out, err = run_cli(capsys, "demo:lm", "--intervene", "blocks.0=scale:0.2",
                             "--generate", "12", "--temperature", "0.8", "--seed", "3", "--json")
    assert code == 0 and err == ""
    data = json.loads(out)["generation"]
    lm = load_model("demo:lm")
    ref = generate(lm.module, lm.example_input, Plan().with_intervention("blocks.0", Scale(0.2)),
                   lm.meaning, 12, temperature=0.8, seed=3)
    assert data["without"] == {"ids": ref.without.ids, "text": ref.without.text,
                               "tokens": ref.without.tokens, "cached": False}
    assert data["with"]["ids"] == ref.with_.ids and data["first_divergence"] == ref.first_divergence
    assert data["sampling"] == "sampled"


def test_generate_check_cache_on_gpt2_json_and_table(capsys, tmp_path):
    pytest.importorskip("transformers", reason="the hf extra (transformers) is not installed")
    sys.path.insert(0, str(Path(__file__).parents[1] / "core"))
    import hf_models
    from hookscope.core import At, Patch, generate

    folder = hf_models.gpt2(tmp_path / "gpt2")
    argv = [f"hf:{folder}", "--input", "text:the cat sat on the", "--intervene",
            "transformer.h.0=patch:text:the dog sat on the@pos=-1", "--generate", "6",
            "--check-cache"]
    code, out, err = run_cli(capsys, *argv, "--json")
    assert code == 0, err
    data = json.loads(out)["generation"]
    assert data["cache_check"]["without"] is None and data["cache_check"]["with"] is None
    assert data["with"]["cached"] is True
    lm = load_model(f"hf:{folder}")
    x = lm.meaning.codec.encode_batch("the cat sat on the")
    plan = Plan().with_intervention("transformer.h.0", Patch("text:the dog sat on the",
                                                             at=At(positions=-1)))
    assert data["with"]["ids"] == generate(lm.module, x, plan, lm.meaning, 6, cache=False).with_.ids
    code, out, _ = run_cli(capsys, *argv, "--no-cache")
    assert code == 0 and "cache is off" in out and "they part without: never, with: never" in out


def test_generate_table_and_sae_table(capsys):
    code, out, _ = run_cli(capsys, "demo:lm", "--generate", "8", "--intervene", "blocks.1=zero",
                           "--sae", "blocks.0=demo")
    assert code == 0 and "first divergence at step" in out and "SAE features at blocks.0" in out
    # each position with its token, as the lens shows it
    lm = load_model("demo:lm")
    tokens = lm.meaning.codec.token_strings(lm.example_input[0].tolist())
    rows = out.split("SAE features at blocks.0", 1)[1].splitlines()[2:2 + len(tokens)]
    assert [r.split()[:2] for r in rows] == [[str(p), repr(t)] for p, t in enumerate(tokens)]


def test_the_lens_table_keeps_its_columns_where_a_cell_changed(capsys):
    """A changed cell reads 'h'->'a': its column is that wide, the next ones do not shift."""
    code, out, _ = run_cli(capsys, "demo:lm", "--input", "text:the cat sat on the ", "--lens",
                           "logit", "--intervene", "blocks.1=zero")
    assert code == 0
    lines = out.split("logit lens (top token per position", 1)[1].splitlines()[1:5]  # + 3 rows
    head, rows = lines[0], lines[1:]
    assert any("->" in r for r in rows) and any("->" not in c for r in rows for c in r.split())
    # every cell of a column starts where its header does
    starts = [i for i in range(1, len(head)) if head[i] == "'" and head[i - 1] == " "]
    for r in rows:
        cells = [i for i in range(1, len(r)) if r[i] == "'" and r[i - 1] == " "]
        assert cells == starts, r


@pytest.mark.parametrize("argv, words", [
    (["demo:lm", "--generate", "0"], "1..4096"),
    (["demo:lm", "--generate", "3", "--temperature", "-1"], "temperature"),
    (["demo:lm", "--seed", "3"], "go with --generate"),
    (["demo:lm", "--check-cache"], "go with --generate"),
    (["demo:lm", "--no-cache"], "go with --generate"),
    (["demo:cnn", "--generate", "3"], "token ids"),
    (["demo:lm", "--generate", "x"], "invalid int"),
    (["demo:lm", "--sae", "blocks.0"], "LAYER=DIR"),
    (["demo:lm", "--intervene", "blocks.1=sae-ablate:1"], "no SAE is attached"),
])
def test_generate_and_sae_mistakes_are_one_line(capsys, argv, words):
    code, out, err = run_cli(capsys, *argv)
    assert code == 2 and words in err and err.count("\n") == 1 and "Traceback" not in err


def test_lm_views_with_a_session_are_refused_not_ignored(capsys, tmp_path):
    session = tmp_path / "s.hookscope.json"
    assert main(["run", "demo:lm", "--save-session", str(session)]) == 0
    capsys.readouterr()
    code, out, err = run_cli(capsys, "--session", str(session), "--generate", "3")
    assert code == 2 and "--session" in err and err.count("\n") == 1
