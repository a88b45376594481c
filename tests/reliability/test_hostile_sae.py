"""Hostile SAE folders for ``--sae LAYER=DIR``: pickles that would run code, sizes in
cfg.json that would exhaust memory, FIFOs and devices that would block or never end,
headers and shapes that lie. Each is refused in one line with status 2, no code runs
(the payload would create a marker), and nothing is allocated past the budget. Every
case runs in ONE subprocess with a time and a memory limit, so a regression fails
here instead of hanging or eating the machine."""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from hostile_files import pickle_payload, torch_save_payload

HERE = Path(__file__).parent
GOOD_CFG = {"d_in": 64, "d_sae": 8, "architecture": "standard"}


def good_tensors(d_in=64, d_sae=8):
    return {"W_enc": torch.zeros(d_in, d_sae), "b_enc": torch.zeros(d_sae),
            "W_dec": torch.zeros(d_sae, d_in), "b_dec": torch.zeros(d_in)}


def folder(root: Path, name: str, cfg=GOOD_CFG, tensors=None, weights: bytes | None = None) -> Path:
    d = root / name
    d.mkdir()
    if cfg is not None:
        (d / "cfg.json").write_text(cfg if isinstance(cfg, str) else json.dumps(cfg))
    if weights is not None:
        (d / "sae_weights.safetensors").write_bytes(weights)
    elif tensors is not None:
        save_file(tensors, str(d / "sae_weights.safetensors"))
    return d


def build_cases(root: Path, marker: Path) -> dict[str, tuple[Path, str]]:
    """name -> (folder, words the one-line refusal must hold)."""
    c: dict[str, tuple[Path, str]] = {}
    d = folder(root, "pickle_only")
    (d / "sae_weights.pt").write_bytes(torch_save_payload(marker))
    c["only a pickle"] = (d, "never loads")
    c["a pickle named .safetensors"] = (folder(root, "pickle_named", weights=pickle_payload(marker)),
                                        "header")
    huge = {"d_in": 64, "d_sae": 1 << 36, "architecture": "standard"}
    c["huge d_sae"] = (folder(root, "huge", cfg=huge, tensors=good_tensors()), "budget")
    c["d_in a string"] = (folder(root, "str", cfg={"d_in": "64", "d_sae": 8},
                                 tensors=good_tensors()), "positive whole number")
    c["d_sae negative"] = (folder(root, "neg", cfg={"d_in": 64, "d_sae": -8},
                                  tensors=good_tensors()), "positive whole number")
    c["unknown architecture"] = (folder(root, "arch", cfg={**GOOD_CFG, "architecture": "evil"},
                                        tensors=good_tensors()), "architecture")
    c["normalised activations"] = (folder(root, "norm", cfg={**GOOD_CFG,
                                                             "normalize_activations": "expected_average_only_in"},
                                          tensors=good_tensors()), "normalize_activations")
    c["shapes differ from cfg"] = (folder(root, "shapes", tensors=good_tensors(64, 16)),
                                   "asks for a float tensor of shape")
    c["a tensor missing"] = (folder(root, "missing", tensors={
        k: v for k, v in good_tensors().items() if k != "b_dec"}), "no tensor b_dec")
    c["header claims 2**60 bytes"] = (folder(root, "header", weights=struct.pack("<Q", 1 << 60) + b"{}"),
                                      "header claims")
    c["cfg not JSON"] = (folder(root, "notjson", cfg="{d_in: 64", tensors=good_tensors()), "not JSON")
    c["cfg of 2 MB"] = (folder(root, "bigcfg", cfg=json.dumps({**GOOD_CFG, "pad": "x" * (2 << 20)}),
                               tensors=good_tensors()), "bytes or more")
    c["deep cfg"] = (folder(root, "deep", cfg="[" * 100000 + "]" * 100000, tensors=good_tensors()),
                     "not JSON")
    for kind in ("fifo", "devzero"):
        d = folder(root, f"weights_{kind}")
        w = d / "sae_weights.safetensors"
        os.mkfifo(w) if kind == "fifo" else w.symlink_to("/dev/zero")
        c[f"weights are a {kind}"] = (d, "not a regular file")
    d = folder(root, "cfg_fifo", cfg=None, tensors=good_tensors())
    os.mkfifo(d / "cfg.json")
    c["cfg is a FIFO"] = (d, "not a regular file")
    fifo_dir = root / "a_fifo"
    os.mkfifo(fifo_dir)
    c["the folder is a FIFO"] = (fifo_dir, "is not a folder")
    return c


_CHILD = r"""
import contextlib, io, json, resource, sys
from hookscope.app.cli import main
import torch
soft = int(sys.argv[2])
resource.setrlimit(resource.RLIMIT_AS, (soft, resource.getrlimit(resource.RLIMIT_AS)[1]))
out = {}
for name, argv in json.loads(sys.argv[1]).items():
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            rc = main(["run", *argv])
        except BaseException as exc:
            rc = repr(exc)
    out[name] = [rc, err.getvalue()]
print(json.dumps(out))
"""


def _address_space_now() -> int:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmPeak"))


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    root = tmp_path_factory.mktemp("sae")
    marker = root / "MARKER"
    cases = build_cases(root, marker)
    argvs = {name: ["demo:lm", "--sae", f"blocks.0={path}"] for name, (path, _) in cases.items()}
    limit = _address_space_now() + (6 << 30)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, "-c", _CHILD, json.dumps(argvs), str(limit)],
                          capture_output=True, text=True, timeout=180, env=env, cwd=root)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return cases, marker, json.loads(proc.stdout.splitlines()[-1])


CASE_NAMES = ["only a pickle", "a pickle named .safetensors", "huge d_sae", "d_in a string",
              "d_sae negative", "unknown architecture", "normalised activations",
              "shapes differ from cfg", "a tensor missing", "header claims 2**60 bytes",
              "cfg not JSON", "cfg of 2 MB", "deep cfg", "weights are a fifo",
              "weights are a devzero", "cfg is a FIFO", "the folder is a FIFO"]


@pytest.mark.timeout(300)
@pytest.mark.parametrize("case", CASE_NAMES)
def test_a_hostile_sae_folder_is_refused_in_one_line(results, case):
    cases, marker, out = results
    rc, err = out[case]
    assert rc == 2, err
    assert err.count("\n") == 1 and err.startswith("hookscope: error: "), err
    assert cases[case][1] in err, err
    assert not marker.exists()


def test_a_layer_sae_width_mismatch_names_both_sizes(capsys):
    from hookscope.app.cli import main

    assert main(["run", "demo:lm", "--sae", "blocks.0.mlp.0=demo"]) == 2
    err = capsys.readouterr().err
    assert "64" in err and "256" in err and err.count("\n") == 1
