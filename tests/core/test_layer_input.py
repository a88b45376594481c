"""``LAYER:input``: any kind and capture aimed at a module's first positional input, through
a forward pre-hook: in a plan, a comparison's source pass, sweep axes and their batched
rows, and estimates. Each against the same thing written by hand with a pre-hook."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from hookscope.core import Plan, compare, load_model, parse_input
from hookscope.core.analyses import sweep
from hookscope.core.plan import parse_intervention
from hookscope.core.plan.path_patterns import expand_paths
from hookscope.core import PlanError

PROMPT = "text:the cat sat on the "
SOURCE = "text:the dog sat on the "


@pytest.fixture(scope="module")
def lm():
    return load_model("demo:lm")


def _x(lm, text=PROMPT):
    return parse_input(text, lm.example_input, lm.meaning.codec)


def _inputs_of(module, layer, x):
    got = []
    h = module.get_submodule(layer).register_forward_pre_hook(
        lambda m, args: got.append(args[0].detach().clone()))
    try:
        with torch.no_grad():
            module(x)
    finally:
        h.remove()
    return got


def test_capture_at_an_input_is_the_tensor_the_module_receives(lm):
    x = _x(lm)
    r = compare(lm.module, x, Plan(capture=("blocks.1.ln2:input", "blocks.1:input")))
    want = _inputs_of(lm.module, "blocks.1.ln2", x)
    assert torch.equal(r.captures["blocks.1.ln2:input"][0].tensor, want[0])
    assert torch.equal(r.captures["blocks.1:input"][0].tensor,
                       _inputs_of(lm.module, "blocks.1", x)[0])


def test_scale_and_patch_at_an_input_equal_hand_written_pre_hooks(lm):
    x, src = _x(lm), _x(lm, SOURCE)
    layer = "blocks.1.ln2"
    r = compare(lm.module, x, Plan(interventions={f"{layer}:input": parse_intervention("scale:0.5")}))
    h = lm.module.get_submodule(layer).register_forward_pre_hook(
        lambda m, args: (args[0] * 0.5, *args[1:]))
    try:
        with torch.no_grad():
            want = lm.module(x)
    finally:
        h.remove()
    assert torch.equal(r.output_with, want)
    source_in = _inputs_of(lm.module, layer, src)[0]
    r = compare(lm.module, x, Plan(interventions={
        f"{layer}:input": parse_intervention(f"patch:{SOURCE}@pos=4")}), codec=lm.meaning.codec)

    def patch(m, args):
        a = args[0].clone()
        a[:, 4] = source_in[:, 4]
        return (a, *args[1:])
    h = lm.module.get_submodule(layer).register_forward_pre_hook(patch)
    try:
        with torch.no_grad():
            want = lm.module(x)
    finally:
        h.remove()
    assert torch.equal(r.output_with, want)
    assert not torch.equal(r.output_with, r.output_without)


def test_patterns_and_the_output_of_the_same_module_stay_apart(lm):
    assert expand_paths("blocks.*:input", lm.module) == ["blocks.0:input", "blocks.1:input"]
    x = _x(lm)
    plan = Plan(interventions={"blocks.0:input": parse_intervention("zero"),
                               "blocks.0": parse_intervention("scale:2")})
    layers = plan.resolve(lm.module)
    assert set(layers) == {"blocks.0", "blocks.0:input"} and layers["blocks.0:input"].at_input
    assert compare(lm.module, x, plan).output_with is not None
    with pytest.raises(PlanError, match="unknown layer 'blocks.7:input'"):
        Plan(capture=("blocks.7:input",)).resolve(lm.module)
    with pytest.raises(PlanError, match="aim at the attention module"):
        Plan(interventions={"blocks.0.attn.proj:input": parse_intervention("zero@heads=0")}
             ).resolve(lm.module)


def test_sweep_over_inputs_batched_equals_one_by_one_and_each_compare(lm):
    x = _x(lm)
    over = {"layer": "blocks.*.ln2:input", "pos": "3:6"}
    tpl = {"{layer}": f"patch:{SOURCE}@pos={{pos}}"}
    metric = "logit-diff:' ',t"
    single = sweep(lm.module, x, over, tpl, metric, meaning=lm.meaning, batch=False)
    batched = sweep(lm.module, x, over, tpl, metric, meaning=lm.meaning)
    assert single.axes["layer"] == ["blocks.0.ln2:input", "blocks.1.ln2:input"]
    assert batched.batched == batched.cells
    np.testing.assert_allclose(batched.values, single.values, rtol=1e-5, atol=1e-6)
    from hookscope.core.analyses.sweep_metrics import make_metric

    m = make_metric(metric, lm.meaning)
    for i, layer in enumerate(single.axes["layer"]):
        for j, p in enumerate(range(3, 6)):
            r = compare(lm.module, x, Plan(interventions={layer: parse_intervention(
                f"patch:{SOURCE}@pos={p}")}, keep_tensors=False), codec=lm.meaning.codec)
            assert single.values[i, j] == m.cell(r.output_without, r.output_with)
    assert np.ptp(single.values) > 0


def test_estimate_at_an_input_equals_hand_written_attribution(lm):
    x, src = _x(lm), _x(lm, SOURCE)
    layer = "blocks.1.ln2"
    res = sweep(lm.module, x, {"pos": "all"}, {f"{layer}:input": f"patch:{SOURCE}@pos={{pos}}"},
                "logit-diff:' ',t", meaning=lm.meaning, estimate=True)
    codec = lm.meaning.codec
    (a_id,), (b_id,) = codec.encode(" "), codec.encode("t")
    kept = {}

    def leaf(m, args):
        kept["a"] = args[0].detach().clone().requires_grad_(True)
        return (kept["a"], *args[1:])
    h = lm.module.get_submodule(layer).register_forward_pre_hook(leaf)
    try:
        with torch.enable_grad():
            out = lm.module(x)
            metric = out[0, -1, a_id].double() - out[0, -1, b_id].double()
            (g,) = torch.autograd.grad(metric, [kept["a"]])
    finally:
        h.remove()
    s = _inputs_of(lm.module, layer, src)[0]
    a = kept["a"].detach()
    for p in range(x.shape[-1]):
        want = float(metric.detach()) + float((g[0, p].double() * (s[0, p] - a[0, p]).double()).sum())
        assert res.estimates[p] == pytest.approx(want, rel=1e-5, abs=1e-7)


def test_exported_script_hooks_inputs_and_named_points_alike(tmp_path, lm):
    import json
    import subprocess
    import sys

    from hookscope.core.export.export import standalone_script

    plan = Plan(capture=("resid_pre.1", "blocks.0.ln2:input"),
                interventions={"blocks.1.ln2:input": parse_intervention(f"patch:{SOURCE}@pos=4"),
                               "blocks.0:input": parse_intervention("scale:0.5")})
    r = compare(lm.module, _x(lm), plan, codec=lm.meaning.codec)
    script = tmp_path / "repro.py"
    script.write_text(standalone_script("demo:lm", plan, input_text=PROMPT))
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout.strip().splitlines()[-1])
    np.testing.assert_allclose(got["output_with"], r.output_with.flatten().tolist(), atol=2e-6)
    np.testing.assert_allclose(got["output_without"], r.output_without.flatten().tolist(), atol=2e-6)
    assert set(got["captures"]) == {"blocks.1:input", "blocks.0.ln2:input"}
    assert not np.allclose(got["output_with"], got["output_without"])


def test_exported_script_writes_resid_mid_as_compare_does(tmp_path, lm):
    """resid_mid, which no module outputs: the script keeps the block's input and adds the
    change to the attention output, so its numbers are compare()'s, captures included."""
    import ast
    import json
    import subprocess
    import sys

    from hookscope.core.export.export import standalone_script

    plan = Plan(capture=("resid_mid.1", "blocks.1.ln2:input"),
                interventions={"resid_mid.0": parse_intervention(f"patch:{SOURCE}@pos=4"),
                               "resid_mid.1": parse_intervention("scale:0.5")})
    r = compare(lm.module, _x(lm), plan, codec=lm.meaning.codec)
    text = standalone_script("demo:lm", plan, input_text=PROMPT)
    (line,) = [ln for ln in text.splitlines() if ln.startswith("MID_SITES = ")]
    assert ast.literal_eval(line.removeprefix("MID_SITES = ")) == {
        "resid_mid.0": ("blocks.0.attn", "blocks.0"), "resid_mid.1": ("blocks.1.attn", "blocks.1")}
    script = tmp_path / "repro.py"
    script.write_text(text)
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout.strip().splitlines()[-1])
    np.testing.assert_allclose(got["output_with"], r.output_with.flatten().tolist(), atol=2e-6)
    np.testing.assert_allclose(got["output_without"], r.output_without.flatten().tolist(), atol=2e-6)
    assert not np.allclose(got["output_with"], got["output_without"])
    assert set(got["stats"]) == set(r.captures) == {"resid_mid.1", "blocks.1.ln2:input"}
    for path, recs in r.captures.items():
        for s, c in zip(got["stats"][path], recs, strict=True):
            assert s["mean"] == pytest.approx(c.stats.mean, rel=1e-5, abs=1e-6)
            assert s["std"] == pytest.approx(c.stats.std, rel=1e-5, abs=1e-6)
    # what the second norm reads is resid_mid as set: scaled by one half
    mid, norm_in = got["stats"]["resid_mid.1"][0], got["stats"]["blocks.1.ln2:input"][0]
    assert norm_in["mean"] == pytest.approx(mid["mean"], rel=1e-6, abs=1e-7)
    assert mid["fraction_changed"] > 0.9

def test_a_module_called_with_keywords_only_is_refused_in_words():
    from torch import nn

    class Inner(nn.Module):
        def forward(self, *, x):
            return x * 2

    class Outer(nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = Inner()

        def forward(self, x):
            return self.inner(x=x)

    with pytest.raises(PlanError, match="keyword inputs only"):
        compare(Outer(), torch.ones(1, 3), Plan(capture=("inner:input",)))
