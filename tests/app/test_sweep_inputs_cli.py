"""``hookscope sweep --inputs``: the mean over a prompt set, its spread and every input's
value in --json and --csv, equal to single-input sweeps run one by one."""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest

from hookscope.app.cli import main

PROMPTS = ["the cat sat on the ", "a dog", "the quick brown fox jumps"]
ARGS = ["--over", "layer=blocks.*", "--over", "alpha=0,3", "--intervene",
        "{layer}=add:v:{alpha}@pos=-1", "--vector", "v=diff:text:the cat|text:the dog",
        "--metric", "logit:e", "--batch", "1"]


@pytest.fixture()
def prompts(tmp_path):
    f = tmp_path / "prompts.txt"
    f.write_text("\n".join(PROMPTS) + "\n")
    return f


def _json(capsys, argv):
    assert main(argv) == 0
    return json.loads(capsys.readouterr().out)


def test_json_and_csv_carry_the_mean_its_spread_and_every_input(prompts, tmp_path, capsys):
    out = tmp_path / "grid.csv"
    got = _json(capsys, ["sweep", "demo:lm", "--inputs", str(prompts), *ARGS, "--json",
                         "--csv", str(out)])
    singles = [_json(capsys, ["sweep", "demo:lm", "--input", "text:" + p, *ARGS, "--json"])
               for p in PROMPTS]
    per = np.array([s["values"] for s in singles])
    assert got["inputs"] == PROMPTS
    assert np.array_equal(np.array(got["per_input"]), per)   # --batch 1: the same runs
    assert np.allclose(got["values"], per.mean(axis=0), rtol=1e-12, atol=0)
    assert np.allclose(got["spread"], per.std(axis=0), rtol=1e-12, atol=0)
    rows = list(csv.reader(out.read_text().splitlines()))
    assert rows[0] == ["layer", "alpha", "logit:e", "spread", "input_0", "input_1", "input_2"]
    assert len(rows) == 1 + 4
    first = [float(v) for v in rows[1][2:]]
    assert first == [got["values"][0][0], got["spread"][0][0], *per[:, 0, 0]]


def test_the_table_says_it_is_a_mean(prompts, capsys):
    assert main(["sweep", "demo:lm", "--inputs", str(prompts), *ARGS]) == 0
    cap = capsys.readouterr()
    assert "mean over 3 inputs" in cap.out
    assert "each of 3 inputs" in cap.err
