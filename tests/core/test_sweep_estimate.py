"""A sweep's first-order estimates (attribution patching) against the same computation
written by hand in plain torch: per swept layer, one forward whose hook swaps the layer's
output (or the output projection's input) for a leaf that requires grad, then
``torch.autograd.grad`` of the metric, and ``<grad, apply(a) - a>`` per cell written out per
kind (patch: source - clean; zero: -clean). Verified cells are the exact sweep's values."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from hookscope.core import At, Patch, load_model, parse_input
from hookscope.core.analyses import EstimateRefused, spearman, sweep
from hookscope.core.analyses.sweep_metrics import make_metric

pytest.importorskip("transformers", reason="the hf extra (transformers) is not installed")
import hf_models  # noqa: E402  (tests/core is on sys.path)

PROMPT = "the cat sat on the"
SOURCE = "the cat sat on a"  # the same number of tokens in the tokenizer trained here
METRIC = "logit-diff:' dog','cat'"


@pytest.fixture(scope="module")
def gpt2(tmp_path_factory):
    return load_model(f"hf:{hf_models.gpt2(tmp_path_factory.mktemp('estimate') / 'gpt2')}")


def _call(model, x):
    return model(**x) if isinstance(x, dict) else model(x)


def _grad_at(model, x, module, metric_of, pre=False):
    """(clean activation, d metric / d activation, metric) at ``module``'s output (``pre``:
    its first input), by swapping it for a leaf in one forward; parameters untouched."""
    kept = {}

    def swap(t):
        leaf = t.detach().clone().requires_grad_(True)
        kept["a"] = leaf
        return leaf

    if pre:
        h = module.register_forward_pre_hook(lambda m, args: (swap(args[0]), *args[1:]))
    else:
        h = module.register_forward_hook(
            lambda m, args, out: (swap(out[0]), *out[1:]) if isinstance(out, tuple) else swap(out))
    try:
        with torch.enable_grad():
            m = metric_of(_call(model, x))
            (g,) = torch.autograd.grad(m, [kept["a"]])
    finally:
        h.remove()
    return kept["a"].detach(), g, float(m.detach())


def _recorded(model, x, module):
    got = []
    h = module.register_forward_hook(lambda m, a, out: got.append(
        (out[0] if isinstance(out, tuple) else out).detach().clone()))
    try:
        with torch.no_grad():
            _call(model, x)
    finally:
        h.remove()
    return got[0]


def _logit_diff(gpt2):
    codec = gpt2.meaning.codec
    (a,), (b,) = codec.encode(" dog"), codec.encode("cat")
    return lambda out: out.logits[0, -1, a].double() - out.logits[0, -1, b].double()


def test_mlp_patching_at_every_position_equals_hand_written_attribution(gpt2):
    codec = gpt2.meaning.codec
    x = parse_input(f"text:{PROMPT}", gpt2.example_input, codec)
    src = parse_input(f"text:{SOURCE}", gpt2.example_input, codec)
    res = sweep(gpt2.module, x, {"layer": "transformer.h.*.mlp", "pos": "all"},
                {"{layer}": f"patch:text:{SOURCE}@pos={{pos}}"}, METRIC, meaning=gpt2.meaning,
                estimate=True)
    n = x["input_ids"].shape[-1]
    assert res.estimates.shape == res.values.shape == (2, n)
    assert np.isnan(res.values).all() and res.verified["cells"] == []
    metric_of = _logit_diff(gpt2)
    for i, layer in enumerate(res.axes["layer"]):
        mod = gpt2.module.get_submodule(layer)
        a, g, m = _grad_at(gpt2.module, x, mod, metric_of)
        s = _recorded(gpt2.module, src, mod)
        for p in range(n):
            want = m + float((g[0, p].double() * (s[0, p].double() - a[0, p].double())).sum())
            assert res.estimates[i, p] == pytest.approx(want, rel=1e-5, abs=1e-6)
    assert res.baseline == pytest.approx(m, rel=1e-6)
    assert np.ptp(res.estimates) > 0  # the grid says something
    # one source forward and one forward with gradients, none per cell: the forward with
    # gradients is also the shared baseline (its values are the plain forward's), so no
    # baseline forward runs beside it
    assert res.forwards["intervened"] == 0 and res.forwards["gradient"] == 1
    assert res.forwards["baseline"] == 0 and res.forwards["source"] == 1


def test_token_source_and_verified_cells_equal_the_exact_sweep(gpt2):
    codec = gpt2.meaning.codec
    x = parse_input(f"text:{PROMPT}", gpt2.example_input, codec)
    ids = torch.tensor([codec.encode(SOURCE)])
    source = {"input_ids": ids, "attention_mask": torch.ones_like(ids)}  # tokens, not text
    over = {"layer": "transformer.h.*.mlp", "pos": "all"}
    tpl = {"{layer}": lambda pos: Patch(source, at=At(positions=[pos]))}
    exact = sweep(gpt2.module, x, over, tpl, METRIC, meaning=gpt2.meaning, batch=False)
    est = sweep(gpt2.module, x, over, tpl, METRIC, meaning=gpt2.meaning, batch=False,
                estimate=True, verify=4)
    ver = est.verified
    assert len(ver["cells"]) == 4
    dist = np.abs(est.estimates - exact.baseline).reshape(-1)
    picked = sorted(np.ravel_multi_index(tuple(np.array(ver["cells"]).T), est.values.shape))
    assert sorted(dist[picked]) == sorted(dist)[-4:]  # the four the estimate moves most
    for c, e, v in zip(ver["cells"], ver["estimates"], ver["values"]):
        assert v == exact.values[tuple(c)]  # each cell its own compare(), bit for bit
        assert est.values[tuple(c)] == v and e == est.estimates[tuple(c)]
    assert np.isnan(est.values).sum() == est.values.size - 4
    assert ver["spearman"] == pytest.approx(spearman(ver["estimates"], ver["values"]))
    # batched verification: the sweep's batched cells, equal to the exact values to rounding
    batched = sweep(gpt2.module, x, over, tpl, METRIC, meaning=gpt2.meaning, estimate=True,
                    verify=est.cells)
    assert batched.batched == est.cells
    np.testing.assert_allclose(batched.values, exact.values, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(batched.estimates, est.estimates, rtol=1e-6, atol=1e-9)
    js = batched.to_json_dict()
    assert js["verified"]["spearman"] == batched.verified["spearman"] > 0.5
    assert np.array(js["estimates"], dtype=float).shape == batched.values.shape


def test_zero_ablating_each_head_equals_hand_written_attribution(gpt2):
    x = parse_input(f"text:{PROMPT}", gpt2.example_input, gpt2.meaning.codec)
    res = sweep(gpt2.module, x, {"block": "0:2", "head": "0:2"},
                {"transformer.h.{block}.attn": "zero@heads={head}"}, METRIC,
                meaning=gpt2.meaning, estimate=True, verify=1)
    metric_of = _logit_diff(gpt2)
    d = gpt2.module.config.n_embd // gpt2.module.config.n_head
    for layer in range(2):
        proj = gpt2.module.get_submodule(f"transformer.h.{layer}.attn.c_proj")
        a, g, m = _grad_at(gpt2.module, x, proj, metric_of, pre=True)
        for head in range(2):
            part = slice(head * d, (head + 1) * d)
            want = m + float((g[..., part].double() * -a[..., part].double()).sum())
            assert res.estimates[layer, head] == pytest.approx(want, rel=1e-5, abs=1e-6)


def test_demo_cnn_conv_channels_with_prob_equal_hand_written_attribution():
    cnn = load_model("demo:cnn")
    x = cnn.example_input
    res = sweep(cnn.module, x, {"layer": "conv1,conv2", "unit": "0:8"},
                {"{layer}": "zero@units={unit}"}, "prob:#3", meaning=cnn.meaning,
                estimate=True, verify=3)

    def prob3(out):
        return torch.softmax(out[0].double(), -1)[3]

    for i, layer in enumerate(["conv1", "conv2"]):
        a, g, m = _grad_at(cnn.module, x, getattr(cnn.module, layer), prob3)
        for u in range(8):
            want = m + float((g[0, u].double() * -a[0, u].double()).sum())
            assert res.estimates[i, u] == pytest.approx(want, rel=1e-5, abs=1e-8)
    assert res.baseline == pytest.approx(m, rel=1e-9)
    exact = sweep(cnn.module, x, {"layer": "conv1,conv2", "unit": "0:8"},
                  {"{layer}": "zero@units={unit}"}, "prob:#3", meaning=cnn.meaning)
    for c, v in zip(res.verified["cells"], res.verified["values"]):
        assert v == pytest.approx(exact.values[tuple(c)], rel=1e-6, abs=1e-9)
    # no parameter was left requiring no grad, none got a .grad
    assert all(p.requires_grad and p.grad is None for p in cnn.module.parameters())


def test_a_registered_kind_is_estimated_through_its_own_apply():
    """scale and clamp, and mean-ablation from a reference input: each kind's own arithmetic
    gives the change, nothing special-cased (checked against a hand-written delta)."""
    cnn = load_model("demo:cnn")
    x = cnn.example_input
    res = sweep(cnn.module, x, {"f": "0.5,2.0"}, {"conv2": "scale:{f}@units=1"}, "prob:#3",
                meaning=cnn.meaning, estimate=True)

    def prob3(out):
        return torch.softmax(out[0].double(), -1)[3]

    a, g, m = _grad_at(cnn.module, x, cnn.module.conv2, prob3)
    for k, f in enumerate([0.5, 2.0]):
        want = m + float((g[0, 1].double() * (f - 1) * a[0, 1].double()).sum())
        assert res.estimates[k] == pytest.approx(want, rel=1e-5, abs=1e-9)


@pytest.mark.parametrize("metric, words", [
    ("kl", "gradient is zero"), ("top-changed", "gradient is zero"),
    ("max-abs-diff", "no first-order signal")])
def test_metrics_without_first_order_signal_are_refused_before_any_forward(metric, words):
    cnn = load_model("demo:cnn")
    calls = []
    h = cnn.module.register_forward_pre_hook(lambda m, a: calls.append(1))
    try:
        with pytest.raises(EstimateRefused, match=words):
            sweep(cnn.module, cnn.example_input, {"unit": "0:2"}, {"conv1": "zero@units={unit}"},
                  metric, meaning=cnn.meaning, estimate=True)
    finally:
        h.remove()
    assert calls == []


def test_verify_without_estimate_is_refused():
    cnn = load_model("demo:cnn")
    with pytest.raises(Exception, match="estimate"):
        sweep(cnn.module, cnn.example_input, {"unit": "0:2"}, {"conv1": "zero@units={unit}"},
              "prob:#3", meaning=cnn.meaning, verify=2)


def test_make_metric_grad_matches_its_cell_value(gpt2):
    x = parse_input(f"text:{PROMPT}", gpt2.example_input, gpt2.meaning.codec)
    met = make_metric(METRIC, gpt2.meaning)
    with torch.no_grad():
        out = _call(gpt2.module, x)
    assert float(met.grad(out, out).detach()) == met.cell(out, out)


def test_mean_ablation_from_a_reference_and_a_metric_function():
    """A reference input's pre-pass reaches the estimate as a patch's source does (the kind's
    own apply gives the change), and a metric given as a function is differentiated."""
    from hookscope.core.plan import parse_intervention
    from hookscope.core.plan.intervention_base import InterventionContext

    cnn = load_model("demo:cnn")
    x = cnn.example_input
    ref = "random:1x1x8x8:seed=4"

    def metric(a, b):
        return b[0, 3] - b[0, 5]

    res = sweep(cnn.module, x, {"u": "0:4"}, {"conv2": f"mean:{ref}@units={{u}}"}, metric,
                meaning=cnn.meaning, estimate=True)
    a, g, m = _grad_at(cnn.module, x, cnn.module.conv2, lambda out: out[0, 3] - out[0, 5])
    ref_out = _recorded(cnn.module, parse_input(ref, x), cnn.module.conv2)
    for u in range(4):
        iv = parse_intervention(f"mean:{ref}@units={u}")
        new = iv.apply(a, InterventionContext("conv2", 0, cnn.module.conv2, ref_out))
        want = m + float((g.double() * (new - a).double()).sum())
        assert res.estimates[u] == pytest.approx(want, rel=1e-5, abs=1e-7)
    assert np.ptp(res.estimates) > 0


def test_normalised_estimates_are_on_the_scale_of_normalised_values(gpt2):
    x = parse_input(f"text:{PROMPT}", gpt2.example_input, gpt2.meaning.codec)
    over = {"layer": "transformer.h.*", "pos": "all"}
    tpl = {"{layer}": f"patch:text:{SOURCE}@pos={{pos}}"}
    raw = sweep(gpt2.module, x, over, tpl, METRIC, meaning=gpt2.meaning, estimate=True)
    norm = sweep(gpt2.module, x, over, tpl, METRIC, meaning=gpt2.meaning, estimate=True,
                 verify=3, normalise=True)
    lo, hi = norm.normalised["clean"], norm.normalised["source"]
    np.testing.assert_allclose(norm.estimates, (raw.estimates - lo) / (hi - lo), rtol=1e-9)
    for c, v in zip(norm.verified["cells"], norm.verified["values"]):
        assert norm.values[tuple(c)] == v
