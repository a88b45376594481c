"""Before and after for every captured layer: the baseline forward captures the same layers."""

import numpy as np
import pytest
import torch
from torch import nn

from hookscope.core import Clamp, Plan, Scale, Zero, compare

X = torch.tensor([[1.0, 2.0, 3.0], [-1.0, 0.5, 2.0]])


def model():
    torch.manual_seed(3)
    return nn.Sequential(nn.Linear(3, 6), nn.ReLU(), nn.Linear(6, 4), nn.Linear(4, 2)).eval()


def plain_outputs(m, x):
    with torch.inference_mode():
        a = m[0](x)
        c = m[2](m[1](a))
        return {"0": a, "2": c, "3": m[3](c)}


def test_downstream_layer_has_its_baseline_binned_like_the_intervened_run():
    m = model()
    r = compare(m, X, Plan(capture=["0", "2", "3"], interventions={"0": Scale(3.0)}))
    plain = plain_outputs(m, X)
    for path in ("0", "2", "3"):
        rec = r.captures[path][0]
        torch.testing.assert_close(rec.baseline_tensor, plain[path])
        b, s = rec.baseline_stats, rec.stats
        assert b.min == pytest.approx(float(plain[path].min()))
        assert b.std == pytest.approx(float(plain[path].std(correction=0)), rel=1e-5)
        np.testing.assert_array_equal(b.hist_edges, s.hist_edges)  # one range: bin by bin
        lo = min(float(plain[path].min()), float(rec.tensor.min()))
        hi = max(float(plain[path].max()), float(rec.tensor.max()))
        assert (s.hist_edges[0], s.hist_edges[-1]) == pytest.approx((lo, hi))
        assert b.hist_counts.sum() == s.hist_counts.sum() == plain[path].numel()
    # Downstream of the scale, the intervened run differs from the baseline.
    assert r.captures["2"][0].stats.mean != pytest.approx(r.captures["2"][0].baseline_stats.mean)
    assert r.captures["2"][0].stats.fraction_changed is None  # no intervention on that layer


def test_statistics_only_mode_keeps_baseline_statistics_only():
    m = model()
    r = compare(m, X, Plan(capture=["0", "3"], interventions={"0": Zero()}, keep_tensors=False))
    plain = plain_outputs(m, X)
    for path in ("0", "3"):
        rec = r.captures[path][0]
        assert rec.tensor is None and rec.baseline_tensor is None
        assert rec.baseline_stats.max == pytest.approx(float(plain[path].max()))
        assert rec.baseline_stats.mean == pytest.approx(float(plain[path].mean()), abs=1e-6)
        # The intervened run's histogram spans the baseline's range too.
        assert rec.stats.hist_edges[0] <= rec.baseline_stats.hist_edges[0] + 1e-9
        assert rec.stats.hist_edges[-1] >= rec.baseline_stats.hist_edges[-1] - 1e-9
    assert r.captures["0"][0].stats.fraction_changed == pytest.approx(
        float((plain["0"] != 0).float().mean()))


def test_baseline_is_reused_with_its_captures_while_only_values_change():
    m = model()
    calls = [0]
    h = m.register_forward_pre_hook(lambda mod, a: calls.__setitem__(0, calls[0] + 1))
    try:
        plan = Plan(capture=["2"], clamp={"0": (-0.5, 0.5)})
        r1 = compare(m, X, plan)
        r2 = compare(m, X, plan.with_clamp("0", -0.1, 0.1), baseline=r1.baseline)
        assert r2.baseline_reused and calls[0] == 3
        assert r2.baseline.captures is r1.baseline.captures
        torch.testing.assert_close(r2.captures["2"][0].baseline_tensor, plain_outputs(m, X)["2"])
        r3 = compare(m, X, plan.with_capture(["2", "3"]), baseline=r2.baseline)
        assert not r3.baseline_reused and r3.captures["3"][0].baseline_tensor is not None
        r4 = compare(m, X, plan.with_intervention("0", Clamp(0.0, 0.2)), baseline=r3.baseline)
        assert not r4.baseline_reused  # captures differ from r3's
    finally:
        h.remove()


def test_capture_only_plan_baseline_equals_the_run():
    m = model()
    r = compare(m, X, Plan(capture=["2"]))
    rec = r.captures["2"][0]
    torch.testing.assert_close(rec.baseline_tensor, rec.tensor, rtol=0, atol=0)
    assert r.to_json_dict()["captures"]["2"][0]["baseline"]["mean"] == pytest.approx(rec.stats.mean)


def test_accelerator_path_bins_the_baseline_like_the_run(monkeypatch):
    # Off the CPU, kept captures are summarised in finish() on the device and the
    # host copy of the baseline is binned on first read; forced here on the CPU.
    import hookscope.core.engine.hooks as hooks

    monkeypatch.setattr(hooks, "summarized_on_read", lambda t: False)
    m = model()
    r = compare(m, X, Plan(capture=["0", "2"], interventions={"0": Scale(-2.0)}))
    plain = plain_outputs(m, X)
    for path in ("0", "2"):
        rec = r.captures[path][0]
        assert rec.stats_ready
        np.testing.assert_array_equal(rec.baseline_stats.hist_edges, rec.stats.hist_edges)
        assert rec.baseline_stats.max == pytest.approx(float(plain[path].max()))
    assert r.captures["0"][0].stats.fraction_changed == pytest.approx(
        float((plain["0"] != 0).float().mean()))
