"""Sweeps: every cell equals the single compare() it stands for, and the shared baseline
and source forward are paid once. Here cells run one by one (batch=False), bit for bit;
tests/core/test_sweep_batch.py checks the batched cells."""

import numpy as np
import pytest
import torch

from hookscope.core import Add, At, Patch, Plan, compare, load_model, parse_input
from hookscope.core.base.errors import PlanError
from hookscope.core.analyses.sweep import sweep
from hookscope.core.analyses.sweep_metrics import make_metric
from hookscope.core.plan import parse_intervention

PROMPT = "text:the cat sat on the "
SOURCE = "text:the dog sat on the "


@pytest.fixture(scope="module")
def lm():
    return load_model("demo:lm")


@pytest.fixture(scope="module")
def cnn():
    return load_model("demo:cnn")


def single(model, x, layers_ivs, metric, meaning):
    """The one comparison a cell stands for, and the metric on it."""
    r = compare(model.module, x, Plan(interventions=layers_ivs, keep_tensors=False),
                codec=meaning.codec)
    return make_metric(metric, meaning).cell(r.output_without, r.output_with), r


def count_forwards(module):
    n = [0]
    h = module.register_forward_pre_hook(lambda m, a: n.__setitem__(0, n[0] + 1))
    return n, h


def test_layers_by_positions_patching_grid_on_demo_lm(lm):
    codec = lm.meaning.codec
    x = parse_input(PROMPT, lm.example_input, codec)
    tokens = codec.encode(" ")[0], codec.encode("t")[0]
    metric = f"logit-diff:#{tokens[0]},#{tokens[1]}"
    n, h = count_forwards(lm.module)
    try:
        res = sweep(lm.module, x, {"layer": "blocks.*", "pos": "all"},
                    {"{layer}": f"patch:{SOURCE}@pos={{pos}}"}, metric, meaning=lm.meaning,
                    batch=False)
    finally:
        h.remove()
    layers = [p for p, _ in lm.module.named_modules() if p.count(".") == 1 and p.startswith("blocks.")]
    assert res.axes["layer"] == layers
    assert res.values.shape == (len(layers), x.shape[-1])
    strings = codec.token_strings(x[0].tolist())
    assert res.axes["pos"][5] == f"5 {strings[5]!r}"
    cells = res.values.size
    # one baseline, one source forward, one intervened forward per cell
    assert n[0] == cells + 2
    assert res.forwards == {"baseline": 1, "source": 1, "intervened": cells}
    for i, layer in enumerate(layers):
        for p in range(x.shape[-1]):
            want, r = single(lm, x, {layer: parse_intervention(f"patch:{SOURCE}@pos={p}")},
                             metric, lm.meaning)
            assert res.values[i, p] == want
            assert res.receipts[(i, p)][layer].to_json_dict() == r.receipts[layer].to_json_dict()
    clean = make_metric(metric, lm.meaning).clean(r.output_without)
    assert res.baseline == clean
    # the positions where the prompts differ move the prediction; the others do not
    assert np.any(res.values != clean) and np.any(res.values == clean)


def test_run_cell_is_the_full_comparison(lm):
    x = parse_input(PROMPT, lm.example_input, lm.meaning.codec)
    res = sweep(lm.module, x, {"layer": "blocks.*", "pos": "4:6"},
                {"{layer}": f"patch:{SOURCE}@pos={{pos}}"}, "kl", meaning=lm.meaning)
    r = res.run_cell(layer="blocks.0", pos=5)
    _, want = single(lm, x, {"blocks.0": parse_intervention(f"patch:{SOURCE}@pos=5")}, "kl",
                     lm.meaning)
    assert torch.equal(r.output_with, want.output_with)
    assert r.outputs_differ
    assert res.value(layer="blocks.0", pos=5) == make_metric("kl", lm.meaning).cell(
        r.output_without, r.output_with)


def test_layers_by_units_zero_ablation_grid_on_demo_cnn(cnn):
    x = cnn.example_input
    res = sweep(cnn.module, x, {"layer": "conv1,conv2", "unit": "0:4"},
                {"{layer}": "zero@units={unit}"}, "prob:#3", meaning=cnn.meaning, batch=False)
    assert res.values.shape == (2, 4)
    assert res.axes == {"layer": ["conv1", "conv2"], "unit": ["0", "1", "2", "3"]}
    for i, layer in enumerate(["conv1", "conv2"]):
        for u in range(4):
            want, r = single(cnn, x, {layer: parse_intervention(f"zero@units={u}")}, "prob:#3",
                             cnn.meaning)
            assert res.values[i, u] == want
    assert len(set(res.values.reshape(-1).tolist())) > 1
    assert res.baseline == pytest.approx(float(torch.softmax(
        compare(cnn.module, x).output_without[0].double(), -1)[3]))


def test_scale_strength_curve_on_demo_cnn(cnn):
    x = cnn.example_input
    res = sweep(cnn.module, x, {"factor": "linspace(0,2,5)"}, {"conv2": "scale:{factor}"},
                "max-abs-diff", meaning=cnn.meaning, batch=False)
    assert res.coords["factor"] == [0.0, 0.5, 1.0, 1.5, 2.0]
    for k, f in enumerate(res.coords["factor"]):
        r = compare(cnn.module, x, Plan(interventions={"conv2": parse_intervention(f"scale:{f}")}))
        assert res.values[k] == r.max_abs_diff
    assert res.values[2] == 0.0 and res.values[0] > 0 and res.values[4] > 0


def test_add_steering_curve_with_a_function_template(lm):
    x = parse_input(PROMPT, lm.example_input, lm.meaning.codec)
    shapes = []
    h = lm.module.get_submodule("blocks.1").register_forward_hook(
        lambda m, a, o: shapes.append(o.shape))
    with torch.no_grad():
        lm.module(x)
    h.remove()
    width = shapes[0][-1]
    v = torch.randn(width, generator=torch.Generator().manual_seed(0))
    res = sweep(lm.module, x, {"alpha": [0.0, 2.0, 4.0]},
                {"blocks.1": lambda alpha: Add(v, alpha)}, "kl", meaning=lm.meaning, batch=False)
    for k, a in enumerate([0.0, 2.0, 4.0]):
        want, _ = single(lm, x, {"blocks.1": Add(v, a)}, "kl", lm.meaning)
        assert res.values[k] == want
    assert res.values[0] == 0.0 and res.values[2] > res.values[1] > 0


@pytest.mark.parametrize("over, intervene, words", [
    ({"layer": "nothing.*"}, {"{layer}": "zero"}, "matches no layer"),
    ({"a": "0:100000", "b": "0:10000"}, {"fc": "scale:{a}{b}"}, "1,000,000,000 cells"),
    ({"a": "linspace(0,1,1000000000)"}, {"fc": "scale:{a}"}, "over the limit of 10,000"),
    ({"layer": "conv1"}, {"{layer}": "zero@units={unit}"}, "names no sweep axis"),
    ({"layer": "conv1", "unit": "0:2"}, {"{layer}": "zero"}, "appears in no template"),
    ({"layer": "conv1"}, {"{layer}": "zap"}, "zap"),
    ({"pos": "all"}, {"fc": "zero@pos={pos}"}, "needs token ids"),
    ({"u": "0:0"}, {"fc": "zero@units={u}"}, "has no values"),
])
def test_hostile_axes_and_templates_are_refused_before_any_forward(cnn, over, intervene, words):
    n, h = count_forwards(cnn.module)
    try:
        with pytest.raises(PlanError, match=words.replace("(", r"\(")):
            sweep(cnn.module, cnn.example_input, over, intervene, "max-abs-diff",
                  meaning=cnn.meaning)
    finally:
        h.remove()
    assert n[0] == 0


def test_json_of_a_sweep(cnn):
    res = sweep(cnn.module, cnn.example_input, {"unit": [0, 1]}, {"conv1": "zero@units={unit}"},
                "prob:#3", meaning=cnn.meaning)
    d = res.to_json_dict()
    assert d["axes"] == {"unit": ["0", "1"]}
    assert d["values"] == res.values.tolist()
    assert d["metric"] == "prob:#3" and d["baseline"] == res.baseline


def test_session_sweep_runs_in_the_runner_and_equals_the_plain_function():
    from hookscope.core import Session

    s = Session.load("demo:lm", input_text=PROMPT)
    try:
        seen = []
        got = s.sweep({"layer": "blocks.*", "pos": "15:19"},
                      {"{layer}": f"patch:{SOURCE}@pos={{pos}}"}, "kl",
                      progress=lambda done, total: seen.append((done, total)))
        lm = s.model
        x = parse_input(PROMPT, lm.example_input, lm.meaning.codec)
        want = sweep(lm.module, x, {"layer": "blocks.*", "pos": "15:19"},
                     {"{layer}": f"patch:{SOURCE}@pos={{pos}}"}, "kl", meaning=lm.meaning)
        assert np.array_equal(got.values, want.values)
        assert got.batched == want.batched == 8
        assert seen[-1] == (8, 8) and len(seen) == 8
        with pytest.raises(PlanError, match="over the limit of 3"):
            s.sweep({"pos": "all"}, {"blocks.0": "zero@pos={pos}"}, max_cells=3)
        assert s.plan.interventions == {}  # the sweep's cells never enter the person's plan
    finally:
        assert s.close()


def test_a_model_whose_kernels_follow_its_hooks_gets_a_baseline_per_hooked_set():
    """nn.TransformerEncoderLayer takes its fused path only without hooks on its parts, so
    a baseline serves only cells hooking the same modules; every cell still equals its
    single comparison bit for bit."""
    tr = load_model("demo:transformer")
    x = tr.example_input
    source = torch.roll(x, 1, dims=-1)
    layers = ["encoder.layers.0.linear1", "encoder.layers.1.linear1"]
    res = sweep(tr.module, x, {"layer": ",".join(layers), "pos": "0:3"},
                {"{layer}": "zero@pos={pos}"}, "max-abs-diff")
    assert res.forwards == {"baseline": 2, "source": 0, "intervened": 6}
    for i, layer in enumerate(layers):
        for p in range(3):
            r = compare(tr.module, x, Plan(interventions={layer: parse_intervention(f"zero@pos={p}")},
                                           keep_tensors=False))
            assert res.values[i, p] == r.max_abs_diff
    patched = sweep(tr.module, x, {"layer": ",".join(layers)},
                    {"{layer}": lambda: Patch(source, at=At(positions=[2]))}, "max-abs-diff")
    assert patched.forwards == {"baseline": 2, "source": 2, "intervened": 2}
