"""The exported script runs with torch alone and prints the statistics compare() gives.

Each script runs in a subprocess where ``import hookscope`` fails: a meta path
finder placed first raises ImportError for it (the editable install maps
``hookscope`` through its own finder, so leaving the repo off ``sys.path``
would not be enough). Its printed numbers are checked against
:func:`hookscope.core.compare` and :func:`hookscope.core.engine.run.record_json`.
"""

import json
import math
import subprocess
import sys

import numpy as np
import pytest

from hookscope.app.cli import main
from hookscope.core import (Add, Clamp, MeanAblate, Patch, Plan, Project, SteeringVector, compare,
                            load_model)
from hookscope.core.analyses.exercises import CLAMP_LAYER, CLAMP_RANGE
from hookscope.core.export.export import standalone_script
from hookscope.core.engine.output_diff import flat_array
from hookscope.core.engine.run import record_json

BLOCKER = '''
import importlib.abc, runpy, sys

class NoHookscope(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "hookscope" or name.startswith("hookscope."):
            raise ImportError(f"No module named {name!r} (blocked: the script must need torch alone)")
        return None

sys.meta_path.insert(0, NoHookscope())
# One interpreter runs every script given (torch is imported once): each one's stdout
# goes to SCRIPT.out, its stderr to SCRIPT.err, its exit status (0, or the exception) to SCRIPT.rc.
import contextlib, traceback
for script in sys.argv[1:]:
    with open(script + ".out", "w") as out, open(script + ".err", "w") as err, \
            contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            runpy.run_path(script, run_name="__main__")
            rc = "0"
        except BaseException:
            rc = traceback.format_exc()
    with open(script + ".rc", "w") as f:
        f.write(rc)
'''

STAT_KEYS = ("min", "max", "mean", "std", "nan_count", "inf_count")


def run_torch_only(paths, cwd):
    """Run each script in ONE fresh interpreter where hookscope cannot be imported;
    returns ``{path: (rc text, stdout, stderr)}``."""
    subprocess.run([sys.executable, "-c", BLOCKER, *map(str, paths)], capture_output=True,
                   text=True, timeout=240, cwd=cwd, check=True)
    from pathlib import Path

    return {p: tuple(Path(f"{p}.{ext}").read_text() for ext in ("rc", "out", "err")) for p in paths}


def close(a, b):
    if a is None or b is None:
        return a is b
    if isinstance(a, float) and math.isnan(a):
        return isinstance(b, float) and math.isnan(b)
    return a == pytest.approx(b, rel=1e-5, abs=1e-6)


FACTORY = '''
import torch
from torch import nn


class Two(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = nn.Linear(4, 6), nn.Linear(6, 3)

    def forward(self, x):
        h = self.a(x)
        return self.b(torch.relu(h) + self.a(x))  # self.a is called twice: two records


def make():
    torch.manual_seed(3)
    return Two(), torch.randn(2, 4)
'''


BIG = '''
import torch


def make():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Conv2d(3, 2, 1), torch.nn.AdaptiveAvgPool2d(1))
'''
BIG_INPUT = "random:4x3x256x256:seed=1"  # 3 MiB: more than a script should carry inline


def _cases(folder):
    """name -> (spec, plan, standalone_script keywords, (module, input) for compare)."""
    import torch

    (folder / "two.py").write_text(FACTORY)
    factory = f"{folder / 'two.py'}:make"
    torch.manual_seed(11)
    state = {k: torch.randn_like(v) for k, v in load_model(factory).module.state_dict().items()}
    torch.save(state, folder / "w.pt")
    src = "random:1x1x8x8:seed=4"

    def example(spec, **kw):
        lm = load_model(spec, **kw)
        return lm.module, lm.example_input

    weighted = load_model(factory, weights=str(folder / "w.pt")).module
    (folder / "big.py").write_text(BIG)
    big = f"{folder / 'big.py'}:make"
    from hookscope.core import parse_input
    return {
        "exercise1": ("demo:clamp", Plan(capture=["0", "1"], clamp={CLAMP_LAYER: CLAMP_RANGE}), {},
                      example("demo:clamp")),
        "cnn": ("demo:cnn", Plan(capture=["conv1", "bn1", "conv2", "fc"], interventions={
            "conv1": Clamp(-0.3, 0.3), "conv2": Patch(src),
            "pool1": MeanAblate(reference="random:4x1x8x8:seed=5")}), {}, example("demo:cnn")),
        "factory": (factory, Plan(capture=["a", "b"], clamp={"a": (float("-inf"), 0.1)}), {},
                    example(factory)),
        "weights": (factory, Plan(capture=["a", "b"], clamp={"a": (-0.2, 0.2)}),
                    {"input_text": "[[1.0, -2.0, 3.0, 0.5]]", "weights": str(folder / "w.pt")},
                    (weighted, torch.tensor([[1.0, -2.0, 3.0, 0.5]]))),
        "steer": ("demo:transformer", Plan(capture=["encoder.layers.0", "encoder.layers.1.linear1"],
                                           interventions={
            "encoder.layers.0": Add(SteeringVector("v", torch.randn(32)), 2.0, norm_units=True),
            "encoder.layers.1.linear1": Project(SteeringVector("w", torch.randn(64)))}), {},
                  example("demo:transformer")),
        "sidecar": (big, Plan(capture=["0"], clamp={"0": (-0.5, 0.5)}),
                    {"input_text": BIG_INPUT, "sidecar": folder / "sidecar.py"},
                    (load_model(big).module, parse_input(BIG_INPUT))),
    }


@pytest.fixture(scope="module")
def ran(tmp_path_factory):
    """Every case exported, all run in one torch-only interpreter: name -> (JSON, table, text, compare())."""
    folder = tmp_path_factory.mktemp("torch_only")
    cases = _cases(folder)
    scripts = {}
    for name, (spec, plan, kw, _) in cases.items():
        scripts[name] = folder / f"{name}.py"
        scripts[name].write_text(standalone_script(spec, plan, **kw))
    outputs = run_torch_only(list(scripts.values()), folder)
    done = {}
    for name, (spec, plan, kw, (module, x)) in cases.items():
        rc, stdout, stderr = outputs[scripts[name]]
        assert rc == "0", f"{name}: {rc}"
        done[name] = (json.loads(stdout), stderr.splitlines(), scripts[name].read_text(),
                      compare(module, x, plan))
    return done


@pytest.mark.parametrize("name", ["exercise1", "cnn", "factory", "weights", "sidecar", "steer"])
def test_script_prints_what_compare_gives(ran, name):
    got, table, _, r = ran[name]
    np.testing.assert_allclose(got["output_without"], flat_array(r.output_without), atol=2e-6)
    np.testing.assert_allclose(got["output_with"], flat_array(r.output_with), atol=2e-6)
    assert got["outputs_differ"] is r.outputs_differ
    assert got["max_abs_diff"] == pytest.approx(r.max_abs_diff, rel=1e-5, abs=1e-6)
    assert set(got["stats"]) == set(r.captures)
    for path, recs in r.captures.items():
        assert len(got["stats"][path]) == len(recs)
        for mine, rec in zip(got["stats"][path], recs):
            want = record_json(rec)
            assert mine["shape"] == want["shape"]
            for k in STAT_KEYS:
                assert close(mine[k], want[k]), (path, k, mine[k], want[k])
                assert close(mine["baseline"][k], want["baseline"][k]), (path, "baseline", k)
            assert mine.get("intervention") == want.get("intervention")
            assert close(mine.get("fraction_changed"), want.get("fraction_changed")), path
    for path in r.captures:  # the human-readable table names every captured layer
        assert any(line.split()[:1] == [path] for line in table)


def test_a_large_input_goes_beside_the_script(ran, tmp_path):
    from hookscope.core.export.export import INLINE_PAYLOAD_BYTES

    _, _, text, _ = ran["sidecar"]
    assert "with_name('sidecar.pt')" in text and len(text) < INLINE_PAYLOAD_BYTES / 10
    small = ran["exercise1"][2]
    assert "b64decode(" in small and "with_name(" not in small  # a demo stays one file


def test_the_blocker_blocks_hookscope(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text("import hookscope\n")
    rc, _, _ = run_torch_only([probe], tmp_path)[probe]
    assert "No module named 'hookscope'" in rc


def test_exercise_one_script_is_plain_torch(ran):
    got, _, text, r = ran["exercise1"]
    code = [line for line in text.splitlines() if not line.lstrip().startswith("#")]
    assert not any("import hookscope" in line or "from hookscope" in line for line in code)
    assert got["stats"]["0"][0]["fraction_changed"] == pytest.approx(
        r.captures["0"][0].stats.fraction_changed) and r.captures["0"][0].stats.fraction_changed > 0
    assert "finally:" in text and "h.remove()" in text  # the pattern it teaches


def test_cnn_script_writes_the_architecture_and_every_kind(ran):
    got, _, text, _ = ran["cnn"]
    assert "class DigitsCNN(nn.Module)" in text
    for fn in ("clamp_leaf", "patch_leaf", "mean_leaf"):
        assert f"def {fn}(" in text
    assert got["stats"]["conv2"][0]["fraction_changed"] > 0


def test_factory_script_imports_the_file_and_records_every_call(ran):
    got, _, text, r = ran["factory"]
    assert "import_file(" in text
    assert len(got["stats"]["a"]) == 2 == len(r.captures["a"])


def test_weights_and_a_typed_input_travel_with_the_script(ran):
    got, _, text, r = ran["weights"]
    assert "read_state_dict(" in text and "weights_only=True" in text
    assert got["outputs_differ"] is True


def _from_header(text):
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("layer "))
    table = []
    for line in lines[start:]:  # the capture table ends at the first blank line (the CLI
        if not line.strip():    # goes on with the output by meaning, which the script leaves out)
            break
        if not line.startswith("{"):
            table.append(line)
    return table


def test_script_table_is_the_cli_table(ran, capsys):
    lo, hi = CLAMP_RANGE
    code = main(["run", "demo:clamp", "--capture", "0,1", "--clamp", f"{CLAMP_LAYER}={lo}:{hi}"])
    cli = capsys.readouterr().out
    assert code == 0
    out = "\n".join(ran["exercise1"][1])
    assert _from_header(out) == _from_header(cli)
    for key in ("output without", "output with", "outputs differ"):
        assert next(x for x in out.splitlines() if x.startswith(key)) == \
            next(x for x in cli.splitlines() if x.startswith(key))
