"""The exported script runs with torch alone and prints the statistics compare() gives.

Each script runs in a subprocess where ``import hookscope`` fails: a meta path
finder placed first raises ImportError for it (the editable install maps
``hookscope`` through its own finder, so leaving the repo off ``sys.path``
would not be enough). Its printed numbers are checked against
:func:`hookscope.core.compare` and :func:`hookscope.core.run.record_json`.
"""

import json
import math
import subprocess
import sys

import numpy as np
import pytest

from hookscope.core import Clamp, MeanAblate, Patch, Plan, compare, load_model
from hookscope.core.exercises import CLAMP_LAYER, CLAMP_RANGE
from hookscope.core.export import standalone_script
from hookscope.core.run import flat_array, record_json

BLOCKER = '''
import importlib.abc, runpy, sys

class NoHookscope(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "hookscope" or name.startswith("hookscope."):
            raise ImportError(f"No module named {name!r} (blocked: the script must need torch alone)")
        return None

sys.meta_path.insert(0, NoHookscope())
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
'''

STAT_KEYS = ("min", "max", "mean", "std", "nan_count", "inf_count")


def run_torch_only(path, cwd):
    return subprocess.run([sys.executable, "-c", BLOCKER, str(path)], capture_output=True,
                          text=True, timeout=120, cwd=cwd)


def close(a, b):
    if a is None or b is None:
        return a is b
    if isinstance(a, float) and math.isnan(a):
        return isinstance(b, float) and math.isnan(b)
    return a == pytest.approx(b, rel=1e-5, abs=1e-6)


def assert_matches_compare(tmp_path, spec, plan, **kw):
    """Export, run torch-only, and compare every printed number with compare()'s."""
    lm = load_model(spec)
    r = compare(lm.module, lm.example_input, plan)
    script = tmp_path / "repro.py"
    script.write_text(standalone_script(spec, plan, **kw))
    out = run_torch_only(script, tmp_path)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.strip().splitlines()
    got = json.loads(lines[-1])
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
    table = "\n".join(lines[:-1])
    for path in r.captures:  # the human-readable table names every captured layer
        assert any(line.split()[0] == path for line in table.splitlines()[1:])
    return got, script.read_text(), r


def test_the_blocker_blocks_hookscope(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text("import hookscope\n")
    out = run_torch_only(probe, tmp_path)
    assert out.returncode != 0 and "No module named 'hookscope'" in out.stderr


def test_exercise_one_script_needs_torch_alone(tmp_path):
    plan = Plan(capture=["0", "1"], clamp={CLAMP_LAYER: CLAMP_RANGE})
    got, text, r = assert_matches_compare(tmp_path, "demo:clamp", plan)
    assert "hookscope" not in text.replace("Hookscope", "").lower().replace("hookscope_", "")
    assert got["stats"]["0"][0]["fraction_changed"] == pytest.approx(
        r.captures["0"][0].stats.fraction_changed)
    assert "finally:" in text and "h.remove()" in text  # the pattern it teaches


def test_cnn_with_a_clamp_a_patch_and_a_mean_ablation(tmp_path):
    src = "random:1x1x8x8:seed=4"
    plan = Plan(capture=["conv1", "bn1", "conv2", "fc"], interventions={
        "conv1": Clamp(-0.3, 0.3), "conv2": Patch(src), "pool1": MeanAblate(reference="random:4x1x8x8:seed=5")})
    got, text, _ = assert_matches_compare(tmp_path, "demo:cnn", plan)
    assert "class DigitsCNN(nn.Module)" in text and "def patch_leaf(" in text
    assert got["stats"]["conv2"][0]["fraction_changed"] > 0


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


def test_file_factory_script_imports_the_file_by_path(tmp_path):
    (tmp_path / "two.py").write_text(FACTORY)
    spec = f"{tmp_path / 'two.py'}:make"
    plan = Plan(capture=["a", "b"], clamp={"a": (float("-inf"), 0.1)})
    got, text, r = assert_matches_compare(tmp_path, spec, plan)
    assert len(got["stats"]["a"]) == 2 == len(r.captures["a"])
    assert "import_file(" in text


def test_weights_and_a_typed_input_travel_with_the_script(tmp_path):
    import torch

    (tmp_path / "two.py").write_text(FACTORY)
    spec = f"{tmp_path / 'two.py'}:make"
    module = load_model(spec).module
    torch.manual_seed(11)
    state = {k: torch.randn_like(v) for k, v in module.state_dict().items()}
    torch.save(state, tmp_path / "w.pt")
    lm = load_model(spec, weights=str(tmp_path / "w.pt"))
    x = torch.tensor([[1.0, -2.0, 3.0, 0.5]])
    plan = Plan(capture=["b"], clamp={"a": (-0.2, 0.2)})
    r = compare(lm.module, x, plan)
    script = tmp_path / "repro.py"
    script.write_text(standalone_script(spec, plan, "[[1.0, -2.0, 3.0, 0.5]]",
                                        weights=str(tmp_path / "w.pt")))
    out = run_torch_only(script, tmp_path)
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout.strip().splitlines()[-1])
    np.testing.assert_allclose(got["output_with"], flat_array(r.output_with), atol=2e-6)
    np.testing.assert_allclose(got["output_without"], flat_array(r.output_without), atol=2e-6)
