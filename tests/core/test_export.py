"""Captures to files, and the exported plain-PyTorch script reproducing the numbers."""

import json
import subprocess
import sys

import numpy as np
import pytest

from hookscope.core import HookscopeError, Plan, Scale, compare, load_model
from hookscope.core.export import save_captures, session_dict, standalone_script


@pytest.fixture(scope="module")
def cnn_result():
    lm = load_model("demo:cnn")
    plan = Plan(capture=["conv1", "relu1", "fc"], clamp={"conv1": (-0.3, 0.3)})
    return lm, plan, compare(lm.module, lm.example_input, plan)


@pytest.mark.parametrize("suffix", [".npz", ".safetensors"])
def test_save_captures_round_trip(tmp_path, cnn_result, suffix):
    _, _, r = cnn_result
    path = save_captures(r.captures, tmp_path / f"caps{suffix}")
    if suffix == ".npz":
        data = dict(np.load(path))
    else:
        from safetensors.numpy import load_file
        data = load_file(str(path))
    assert set(data) == {"conv1#0", "conv1#0:before", "relu1#0", "fc#0"}
    np.testing.assert_array_equal(data["conv1#0"], r.captures["conv1"][0].tensor.numpy())
    np.testing.assert_array_equal(data["conv1#0:before"], r.captures["conv1"][0].pre_tensor.numpy())


def test_save_captures_refuses_what_it_cannot_write(tmp_path, cnn_result):
    lm, _, r = cnn_result
    with pytest.raises(HookscopeError, match=".npz or .safetensors"):
        save_captures(r.captures, tmp_path / "caps.csv")
    stats_only = compare(lm.module, lm.example_input, Plan(capture=["fc"], keep_tensors=False))
    with pytest.raises(HookscopeError, match="statistics-only"):
        save_captures(stats_only.captures, tmp_path / "caps.npz")


def test_script_reproduces_the_comparison(tmp_path, cnn_result):
    lm, plan, r = cnn_result
    script = tmp_path / "repro.py"
    script.write_text(standalone_script("demo:cnn", plan))
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["output_without"] == [round(v, 6) for v in r.output_without.flatten().tolist()]
    assert got["output_with"] == [round(v, 6) for v in r.output_with.flatten().tolist()]
    assert got["outputs_differ"] is True
    assert got["max_abs_diff"] == pytest.approx(r.max_abs_diff)
    assert got["captures"] == {p: [list(rec.tensor.shape) for rec in recs]
                               for p, recs in r.captures.items()}
    text = script.read_text()
    assert "finally:" in text and "h.remove()" in text  # the pattern it teaches


def test_script_refuses_interventions_it_cannot_write():
    with pytest.raises(HookscopeError, match="clamps only"):
        standalone_script("demo:cnn", Plan(interventions={"fc": Scale(2.0)}))


def test_session_dict_is_json(cnn_result):
    _, plan, r = cnn_result
    d = json.loads(json.dumps(session_dict(r, "demo:cnn", plan)))
    assert d["plan"]["clamp"] == {"conv1": [-0.3, 0.3]} and d["spec"] == "demo:cnn"
    assert d["captures"]["fc"][0]["shape"] == [1, 10]
