"""`hookscope run` with --vector, add:/project:, and the receipts in the table and --json."""

import json

import torch

from hookscope.app.cli import main
from hookscope.core import Add, Plan, compare, load_model, parse_input
from hookscope.core.engine.receipts import CHANGED_NOTHING
from hookscope.core.analyses.steer_diff import diff_vector

PROMPT = "text:the cat sat on the "
DIFF = "diff:text:the cat sat|text:the dog sat"


def run_cli(capsys, *argv):
    code = main(["run", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_a_diff_vector_steers_like_the_api_and_shows_receipts(capsys):
    code, out, err = run_cli(capsys, "demo:lm", "--input", PROMPT, "--vector", f"cd={DIFF}",
                             "--intervene", "blocks.0=add:cd:4", "--intervene",
                             "blocks.0.attn.probs=clamp:-5:5", "--json")
    assert code == 0 and err == ""
    data = json.loads(out)
    lm = load_model("demo:lm")
    vec = diff_vector(lm.module, "blocks.0", DIFF, "cd", lm.example_input, lm.meaning.codec)
    x = parse_input(PROMPT, lm.example_input, lm.meaning.codec)
    r = compare(lm.module, x, Plan(interventions={"blocks.0": Add(vec, 4.0)}))
    assert data["max_abs_diff"] == r.max_abs_diff
    rc = data["receipts"]["blocks.0"]
    assert rc["fired_calls"] == 1 and rc["changed"] == rc["elements"] > 0 and rc["alarm"] is None
    assert rc["relative_change"] == r.receipts["blocks.0"].relative_change
    assert data["receipts"]["blocks.0.attn.probs"]["alarm"] == CHANGED_NOTHING


def test_the_table_shows_each_receipt_and_its_alarm(capsys, tmp_path):
    torch.save(torch.randn(64), tmp_path / "v.pt")
    code, out, _ = run_cli(capsys, "demo:lm", "--input", PROMPT, "--vector", f"v={tmp_path / 'v.pt'}",
                           "--intervene", "blocks.1.mlp=project:v", "--intervene",
                           "blocks.0.attn.probs=clamp:-5:5")
    assert code == 0
    lines = out.split("receipts\n", 1)[1].splitlines()
    assert lines[0].startswith("  blocks.1.mlp: project(out v) fired 1x") and "ALARM" not in lines[0]
    assert lines[1].startswith("  blocks.0.attn.probs: clamp(-5, 5) fired 1x, changed 0/")
    assert f"ALARM: {CHANGED_NOTHING}" in lines[1]
    # the output's change is the whole plan's: said once, not at the end of every line
    assert all("output" not in line for line in lines[:2])
    assert lines[2].startswith("  output (the whole plan): changed (max |diff| ")


def test_vector_mistakes_are_one_line(capsys, tmp_path):
    torch.save(torch.randn(7), tmp_path / "v.pt")
    for argv, words in (
            (["--intervene", "blocks.0=add:nope:1"], "no --vector defines"),
            (["--vector", f"v={tmp_path / 'v.pt'}", "--intervene", "blocks.0=add:v"],
             "7 values but layer 'blocks.0' has 64 features"),
            (["--vector", "v=diff:text:a", "--intervene", "blocks.0=project:v"], "separated by |"),
            (["--vector", "v", "--intervene", "blocks.0=project:v"], "NAME=diff:"),
            (["--vector", "v=x.pt", "--vector", "v=y.pt"], "defined twice")):
        code, out, err = run_cli(capsys, "demo:lm", "--input", PROMPT, *argv)
        assert code == 2 and words in err and err.count("\n") == 1, (argv, err)
