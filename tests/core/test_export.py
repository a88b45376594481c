"""Captures to files, and the exported plain-PyTorch script reproducing the numbers."""

import json
import subprocess
import sys

import numpy as np
import pytest
import torch

from hookscope.core import HookscopeError, Plan, Scale, compare, load_model
from hookscope.core.export.export import save_captures, session_dict, standalone_script


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
    # each call's value in the intervened run, before the layer's own intervention, and in
    # the baseline run (the two runs can be compared from the file)
    assert set(data) == {"conv1#0", "conv1#0:before", "conv1#0:baseline", "relu1#0",
                         "relu1#0:baseline", "fc#0", "fc#0:baseline"}
    np.testing.assert_array_equal(data["conv1#0"], r.captures["conv1"][0].tensor.numpy())
    np.testing.assert_array_equal(data["conv1#0:before"], r.captures["conv1"][0].pre_tensor.numpy())
    for layer in ("conv1", "relu1", "fc"):
        np.testing.assert_array_equal(data[f"{layer}#0:baseline"],
                                      r.captures[layer][0].baseline_tensor.numpy())


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


def test_script_refuses_a_kind_without_a_torch_form():
    from dataclasses import dataclass

    from hookscope.core import Intervention

    @dataclass(frozen=True)
    class Opaque(Intervention):
        name = "opaque"

        def apply_tensor(self, t, ctx):
            return t

    with pytest.raises(HookscopeError, match="no plain-torch form"):
        standalone_script("demo:cnn", Plan(interventions={"fc": Opaque()}))


def test_session_dict_is_json(cnn_result):
    _, plan, r = cnn_result
    d = json.loads(json.dumps(session_dict(r, "demo:cnn", plan)))
    assert d["plan"]["clamp"] == {"conv1": [-0.3, 0.3]} and d["spec"] == "demo:cnn"
    assert d["captures"]["fc"][0]["shape"] == [1, 10]


NESTED = '''
import torch
from torch import nn


class Pair(nn.Module):  # a dict of tensors
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 4)

    def forward(self, x):
        h = self.fc(x)
        return {"a": h, "b": h * 2}


class Nest(nn.Module):  # a nested tuple
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 4)

    def forward(self, x):
        h = self.fc(x)
        return (h, (h * 2,))


class M(nn.Module):
    def __init__(self):
        super().__init__()
        self.pair, self.nest, self.out = Pair(), Nest(), nn.Linear(4, 2)

    def forward(self, x):
        d, n = self.pair(x), self.nest(x)
        return self.out(d["a"] + d["b"] + n[0] + n[1][0]), d["b"]


def make():
    torch.manual_seed(0)
    return M(), torch.tensor([[1.0, 2.0, 3.0]])
'''


def test_script_reproduces_nested_outputs(tmp_path):
    (tmp_path / "nested.py").write_text(NESTED)
    spec = f"{tmp_path / 'nested.py'}:make"
    lm = load_model(spec)
    plan = Plan(capture=["pair"], clamp={"pair": (-0.1, 0.1), "nest": (-0.2, 0.2)})
    r = compare(lm.module, lm.example_input, plan)
    script = tmp_path / "repro.py"
    script.write_text(standalone_script(spec, plan))
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout.strip().splitlines()[-1])
    from hookscope.core.engine.output_diff import flat_array

    assert got["output_with"] == [round(v, 6) for v in flat_array(r.output_with).tolist()]
    assert got["output_without"] == [round(v, 6) for v in flat_array(r.output_without).tolist()]


def test_bfloat16_captures_save_in_both_formats(tmp_path):
    from torch import nn

    m = nn.Sequential(nn.Linear(3, 4)).to(torch.bfloat16)
    r = compare(m, torch.ones(1, 3, dtype=torch.bfloat16), Plan(capture=["0"]))
    from safetensors.torch import load_file

    st = load_file(str(save_captures(r.captures, tmp_path / "c.safetensors")))
    assert st["0#0"].dtype == torch.bfloat16 and torch.equal(st["0#0"], r.captures["0"][0].tensor)
    npz = np.load(save_captures(r.captures, tmp_path / "c.npz"))
    np.testing.assert_array_equal(npz["0#0"], r.captures["0"][0].tensor.float().numpy())


def run_script(tmp_path, text):
    script = tmp_path / "repro.py"
    script.write_text(text)
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_script_writes_every_kind_in_plain_torch(tmp_path):
    from hookscope.core import Clamp, MeanAblate, Noise, Patch, Zero

    src = "random:1x1x8x8:seed=4"
    plan = Plan(capture=["conv2", "fc"], interventions={
        "conv1": Zero(units=(0, 3)), "bn1": Scale(0.5), "conv2": Patch(src),
        "relu2": Noise(0.2, 9), "pool1": MeanAblate(reference=src), "fc": Clamp(None, 2.0)})
    lm = load_model("demo:cnn")
    r = compare(lm.module, lm.example_input, plan)
    text = standalone_script("demo:cnn", plan)
    for fn in ("zero_leaf", "scale_leaf", "patch_leaf", "noise_leaf", "mean_leaf", "clamp_leaf"):
        assert f"def {fn}(" in text
    got = run_script(tmp_path, text)
    np.testing.assert_allclose(got["output_with"], r.output_with.flatten().tolist(), atol=2e-6)
    np.testing.assert_allclose(got["output_without"], r.output_without.flatten().tolist(), atol=2e-6)
    assert got["captures"] == {"conv2": [[1, 16, 4, 4]], "fc": [[1, 10]]}


def test_script_writes_open_bounds_as_float_inf(tmp_path):
    from hookscope.core import Clamp

    text = standalone_script("demo:clamp", Plan(interventions={"0": Clamp(float("-inf"), 0.5)}))
    assert "lo=None, hi=0.5" in text
    text = standalone_script("demo:clamp", Plan(interventions={"0": Scale(float("inf"))}))
    assert "factor=float('inf')" in text
