"""``hookscope diff`` refusals: one line on stderr, exit status 2, no traceback, nothing written,
and --save-direction never replaces a file the command reads."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

from hookscope.app.cli import main

MODELS = '''
import torch
from torch import nn


class Det(nn.Module):
    """A layer whose op has no float16 kernel on the CPU (an LU factorisation)."""

    def forward(self, x):
        return x * torch.linalg.det(x[..., :2, :2]).unsqueeze(-1).unsqueeze(-1)


def small():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 3), nn.ReLU()), torch.ones(1, 4)


def renamed():
    torch.manual_seed(0)
    m = nn.Sequential()
    m.add_module("fc", nn.Linear(4, 3))
    return m, torch.ones(1, 4)


def wide():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(5, 3)), torch.ones(1, 5)


def det():
    return nn.Sequential(nn.Linear(2, 2), Det()), torch.eye(2).reshape(1, 2, 2) + 0.5
'''


@pytest.fixture
def models(tmp_path: Path) -> Path:
    path = tmp_path / "diff_models.py"
    path.write_text(MODELS)
    return path


def refused(argv: list[str], capsys, *needles: str) -> str:
    rc = main(["diff", *argv])
    cap = capsys.readouterr()
    assert rc == 2, cap
    assert cap.err.count("\n") == 1 and "Traceback" not in cap.err, cap.err
    assert cap.out == ""
    for n in needles:
        assert n in cap.err, cap.err
    return cap.err


def test_no_layer_in_common(models, capsys):
    refused([f"{models}:small", f"{models}:renamed"], capsys, "no layer in common")


def test_an_input_b_cannot_take(models, capsys):
    refused([f"{models}:small", f"{models}:wide"], capsys, "model B cannot take the input")


def test_a_dtype_the_device_cannot_run(models, capsys):
    # float32 runs: the model is fine
    assert main(["diff", f"{models}:det", "--json"]) == 0
    capsys.readouterr()
    refused([f"{models}:det", "--b-dtype", "float16"], capsys, "model B in float16 cannot run on cpu",
            "--b-dtype")


def test_bad_options(models, capsys):
    refused([f"{models}:small", "--b-dtype", "float8"], capsys, "float8")
    refused([f"{models}:small", "--tolerance", "nan"], capsys, "--tolerance")
    refused([f"{models}:small", "--tolerance", "-1"], capsys, "--tolerance")
    refused([f"{models}:small", "--save-direction", "0"], capsys, "LAYER=FILE")
    refused([f"{models}:small", "--save-direction", "0=v.txt"], capsys, ".pt, .safetensors or .npy")


def test_save_direction_never_replaces_an_input(models, tmp_path, capsys):
    weights = tmp_path / "w.pt"
    lm_state = {"0.weight": torch.zeros(3, 4), "0.bias": torch.ones(3)}
    torch.save(lm_state, weights)
    x = tmp_path / "x.pt"
    torch.save(torch.ones(1, 4), x)
    link = tmp_path / "link.pt"
    os.symlink(weights, link)
    before = {p: p.read_bytes() for p in (weights, x)}
    spec = f"{models}:small"
    refused([spec, "--b-weights", str(weights), "--save-direction", f"0={weights}"], capsys,
            "would overwrite the --b-weights file")
    refused([spec, "--b-weights", str(weights), "--save-direction", f"0={link}"], capsys,
            "would overwrite")
    refused([spec, "--input", str(x), "--save-direction", f"0={x}"], capsys,
            "would overwrite the input file")
    refused([spec, "--save-direction", f"0={tmp_path / 'no' / 'v.pt'}"], capsys, "does not exist")
    out = tmp_path / "v.pt"
    refused([spec, "--b-weights", str(weights), "--save-direction", f"0={out}",
             "--save-direction", f"1={out}"], capsys, "its own file")
    refused([spec, "--b-weights", str(weights), "--save-direction", f"nope={out}"], capsys,
            "--save-direction 'nope'")
    assert not out.exists()
    assert {p: p.read_bytes() for p in (weights, x)} == before
    # and where nothing is in the way, it is written
    assert main(["diff", spec, "--b-weights", str(weights), "--input", str(x),
                 "--save-direction", f"0={out}", "--json"]) == 0
    assert out.exists()


def test_over_the_memory_budget_and_a_missing_device(models, capsys):
    # demo:cnn's conv1 and bn1 outputs are 2 KiB each: a 3000-byte budget stops at bn1
    refused(["demo:cnn", "--b-dtype", "bfloat16", "--memory-budget", "3KB"], capsys,
            "memory budget", "at layer 'bn1'", "--memory-budget")
    refused(["demo:cnn", "--memory-budget", "lots"], capsys, "--memory-budget")
    if not torch.cuda.is_available():
        refused([f"{models}:small", "--b-device", "cuda"], capsys, "CUDA")
    refused([f"{models}:small", "--b-device", "tpu"], capsys, "tpu")
