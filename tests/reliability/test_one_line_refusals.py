"""Command lines that ended in a traceback: each is now one line with status 2 that says
what to do (or, for a sampling temperature near 0, simply works).

A grid axis longer than ``len()`` can count; a scan whose forward fails on a float16
batch; a seed outside torch's range; ``--lens-head`` naming layers that are not a final
norm and an unembedding; a superscript digit ("²"), which ``str.isdigit`` accepts and
``int()`` refuses, wherever a number or an index is typed.
"""

from __future__ import annotations

import json

import pytest
import torch

from hookscope.app.cli import main


def _one_line(capsys, argv: list[str], says: str, talk: int = 0) -> str:
    """``talk``: lines the command prints on stderr before the error (what it will run)."""
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 + talk and "Traceback" not in err, err
    line = err.splitlines()[-1]
    assert line.startswith("hookscope: error: ") and says in line, err
    return line


SWEEP = ["sweep", "demo:clamp", "--intervene", "0=scale:{f}", "--over"]


@pytest.mark.parametrize("axis", ["f=linspace(0,1,99999999999999999999999)",
                                  "f=logspace(0,1,99999999999999999999999)",
                                  "f=0:99999999999999999999999",
                                  "f=99999999999999999999999:0:-1"])
def test_an_axis_too_long_to_count_is_over_the_cell_limit(capsys, axis):
    line = _one_line(capsys, [*SWEEP, axis], "over the limit of 10,000")
    assert "99,999,999,999,999,999,999,999 cells" in line and "--max-cells" in line


def test_a_range_axis_still_counts_its_cells(capsys):
    assert main([*SWEEP, "f=0:10:3", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["axes"]["f"] == ["0", "3", "6", "9"]


def test_a_scan_whose_forward_fails_is_one_line_as_a_run_is(tmp_path, capsys):
    batch = tmp_path / "half.pt"
    torch.save(torch.randn(4, 3).half(), batch)
    run_line = _one_line(capsys, ["run", "demo:clamp", "--input", str(batch)],
                         "the model's forward failed on the input")
    scan_line = _one_line(capsys, ["scan", "demo:clamp", "--inputs", str(batch)],
                          "the model's forward failed on the input", talk=1)
    assert "input 0 of" in scan_line and "float16" in scan_line
    assert "Check that the input's shape and dtype" in scan_line
    assert run_line.split(": ", 2)[-1].split(" (")[0] in scan_line


def _continuation(capsys, argv: list[str]) -> list:
    assert main(["run", "demo:lm", "--json", "--generate", "4", *argv]) == 0
    gen = json.loads(capsys.readouterr().out)["generation"]
    return [gen["without"]["ids"], gen["with"]["ids"]]


def test_a_temperature_near_zero_samples_the_greedy_tokens(capsys):
    # softmax(logits / 1e-45) is NaN everywhere; the same distribution from shifted logits is
    # all on the top token, so sampling gives what greedy decoding gives.
    assert _continuation(capsys, ["--temperature", "1e-45"]) == _continuation(capsys, [])


@pytest.mark.parametrize("seed", ["99999999999999999999999", "-99999999999999999999999"])
def test_a_seed_outside_torchs_range_is_one_line(capsys, seed):
    _one_line(capsys, ["run", "demo:lm", "--generate", "3", "--temperature", "1", "--seed", seed],
              "the seed must be a whole number from")


@pytest.mark.parametrize("head,says", [
    ("blocks.0,blocks.1", "these layers do not take a block's output (width 64) to token scores"),
    (",blocks.1.mlp", "give 64 scores a position, but the model's output has 32"),
])
def test_a_lens_head_that_is_not_a_norm_and_an_unembedding_is_one_line(capsys, head, says):
    line = _one_line(capsys, ["run", "demo:lm", "--lens", "logit", "--lens-head", head], says)
    assert "NORM,UNEMBED" in line


@pytest.mark.parametrize("argv,says", [
    (["run", "demo:clamp", "--max-memory", "²=200MB"], "the device is cpu, disk, mps"),
    (["run", "demo:clamp", "--max-memory", "cuda:²=200MB"], "the device is cpu, disk, mps"),
    (["run", "demo:lm", "--lens", "logit", "--lens-token", "#²"], "the lens token '#²'"),
    (["sweep", "demo:lm", "--over", "f=1,2", "--intervene", "blocks.0=scale:{f}",
      "--metric", "prob:#²"], "metric 'prob:#²'"),
], ids=["max-memory-index", "max-memory-cuda", "lens-token", "sweep-metric"])
def test_a_superscript_digit_is_not_a_number(capsys, argv, says):
    _one_line(capsys, argv, says)


def test_only_ascii_digits_are_digits():
    from hookscope.core.base import is_digits
    from hookscope.core.base.user_text import as_int

    assert is_digits("042") and not is_digits("²") and not is_digits("٣") and not is_digits("")
    assert as_int(" -12 ") == -12 and as_int("--5") is None and as_int("²") is None
