"""The exported script is code written from user text: names must never become statements.

File names, model specs and intervention descriptions go into the script
``--export-script`` writes. Each hostile name here carries a statement that
would create a marker file (``open('pwN', 'w')``) if it escaped its string or
its comment; the script must parse, hold exactly the statements a benign name
gives, never create a marker when it runs, and still print the numbers
Hookscope computes.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from hookscope.app.cli import main
from hookscope.core import MeanAblate, Patch, Plan, compare, load_model, parse_input
from hookscope.core.engine.output_diff import flat_floats

# Each breaks out of a '#' comment or a quoted string in its own way; short enough (with
# ".npy") that an intervention's description quotes the whole name.
HOSTILE = [
    "a\n0:open('pw1','w')#",     # a newline ends the comment
    "b\ropen('pw2','w')#",       # a lone CR is a line break to Python
    "c\u2028open('pw3','w')#",   # line separators: editors and splitlines() break there
    "d\x85open('pw4','w')#",
    "'\"\"\"\\\nopen('pw5')#",      # quotes of every kind, a backslash-newline
]

MODEL = """
import torch
from torch import nn


def build():
    torch.manual_seed(3)
    return nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2)), torch.tensor([[1.0, -2.0, 3.0]])
"""


def _statements(tree: ast.AST) -> list[str]:
    return [type(n).__name__ for n in ast.walk(tree) if isinstance(n, ast.stmt)]


def _calls_open(tree: ast.AST) -> bool:
    return any(isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "open"
               for n in ast.walk(tree))


def _export(capsys, argv: list[str], script: Path) -> ast.Module:
    assert main(["run", *argv, "--export-script", str(script)]) == 0, capsys.readouterr().err
    capsys.readouterr()
    return ast.parse(script.read_text(encoding="utf-8"))


def _run_scripts(paths: list[Path], cwd: Path) -> list[dict]:
    code = ("import runpy, sys\n"
            "for p in sys.argv[1:]:\n"
            "    runpy.run_path(p, run_name='__main__')\n")
    proc = subprocess.run([sys.executable, "-c", code, *map(str, paths)], cwd=cwd,
                          capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return [json.loads(line) for line in proc.stdout.splitlines()]


@pytest.mark.parametrize("kind", ["patch", "mean"])
def test_hostile_source_input_names_stay_data(tmp_path, capsys, monkeypatch, kind):
    """A --source-input (patch) or --reference-input (mean) file whose name holds a statement,
    given relative to the current folder as a person would type it."""
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    values = np.array([[0.5, -1.0, 2.0]], dtype=np.float32)
    clean = work / "clean.npy"
    np.save(clean, values)
    option = "--source-input" if kind == "patch" else "--reference-input"
    scripts, trees = [], []
    for i, name in enumerate(["clean", *HOSTILE]):
        src = Path(f"{name}.npy")
        if name != "clean":
            src.write_bytes(clean.read_bytes())
        script = work / f"s{i}.py"
        trees.append(_export(capsys, ["demo:clamp", "--intervene", f"0={kind}", option, src.name,
                                      "--capture", "0,1"], script))
        scripts.append(script)
    for tree in trees:
        assert _statements(tree) == _statements(trees[0])  # no extra statement anywhere
        assert not _calls_open(tree)
    results = _run_scripts(scripts, work)
    assert sorted(p.name for p in work.iterdir() if p.name.startswith("pw")) == []
    lm = load_model("demo:clamp")
    x = parse_input("", lm.example_input)
    iv = Patch(str(clean)) if kind == "patch" else MeanAblate(str(clean))
    ref = compare(lm.module, x, Plan(capture=("0", "1"), interventions={"0": iv}), "cpu")
    for got in results:
        assert got["output_with"] == pytest.approx(flat_floats(ref.output_with), abs=1e-6)
        assert got["output_without"] == pytest.approx(flat_floats(ref.output_without), abs=1e-6)


def test_hostile_model_and_weights_paths_stay_data(tmp_path, capsys):
    """A factory file and a --weights file in folders whose names hold statements."""
    import torch

    scripts, trees = [], []
    for i, name in enumerate(["clean", *HOSTILE]):
        folder = tmp_path / f"{name}dir"
        folder.mkdir()
        (folder / "net.py").write_text(MODEL)
        module = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))
        torch.save(module.state_dict(), folder / f"{name}w.pt")
        script = tmp_path / f"s{i}.py"
        trees.append(_export(capsys, [f"{folder / 'net.py'}:build", "--weights",
                                      str(folder / f"{name}w.pt"), "--clamp", "0=-0.1:0.1",
                                      "--capture", "0"], script))
        scripts.append(script)
    for tree in trees:
        assert _statements(tree) == _statements(trees[0])
        assert not _calls_open(tree)
    results = _run_scripts(scripts, tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("pw")) == []
    for name, got in zip(["clean", *HOSTILE], results):
        folder = tmp_path / f"{name}dir"
        lm = load_model(f"{folder / 'net.py'}:build", weights=str(folder / f"{name}w.pt"))
        ref = compare(lm.module, lm.example_input, Plan(clamp={"0": (-0.1, 0.1)}), "cpu")
        assert got["output_with"] == pytest.approx(flat_floats(ref.output_with), abs=1e-6)


def test_comments_escape_every_line_break():
    from hookscope.core.export.script_template import comment_text

    for text in HOSTILE + ["x\x00y", "x\x0cy", "x\u2029y", "x\x1b[31my"]:
        line = f"# {comment_text(text)}\n"
        assert len(line.splitlines()) == 1  # str.splitlines knows every Unicode line break
        assert ast.parse(line).body == []


def test_hostile_hf_folder_names_stay_data(tmp_path, capsys):
    """An hf: model folder whose name holds a statement: the script's from_pretrained gets
    the path as a string, its comments carry it escaped."""
    import shutil

    pytest.importorskip("transformers", reason="the hf extra (transformers) is not installed")
    sys.path.insert(0, str(Path(__file__).parents[1] / "core"))
    try:
        import hf_models
    finally:
        sys.path.pop(0)
    first = hf_models.gpt2(tmp_path / "cleanhf")
    scripts, trees = [], []
    for i, name in enumerate(["clean", *HOSTILE]):
        folder = tmp_path / f"{name}hf"
        if name != "clean":
            shutil.copytree(first, folder)
        script = tmp_path / f"s{i}.py"
        trees.append(_export(capsys, [f"hf:{folder}", "--input", "text:the cat sat",
                                      "--intervene", "transformer.h.0=zero",
                                      "--capture", "transformer.h.0"], script))
        scripts.append(script)
    for tree in trees:
        assert _statements(tree) == _statements(trees[0])
        assert not _calls_open(tree)
    results = _run_scripts(scripts, tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("pw")) == []
    lm = load_model(f"hf:{first}")
    x = parse_input("text:the cat sat", lm.example_input, lm.meaning.codec)
    from hookscope.core import Zero

    ref = compare(lm.module, x, Plan(interventions={"transformer.h.0": Zero()}), "cpu")
    for got in results:
        assert got["output_with"] == pytest.approx(flat_floats(ref.output_with), abs=1e-5)
