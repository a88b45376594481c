"""LayerPairRequest: model A and model B captured at a few layers, the plan's interventions
on both; B's records hold A's same call as their baseline, binned alike, with a ModelPair
whose numbers are the diff's. Checked against plain torch forward hooks on two models
(float32 on one thread, the same kernels: compared to 1e-6 relative)."""

from __future__ import annotations

import copy
import pickle
from collections import OrderedDict

import pytest
import torch
from torch import nn

from hookscope.core import Plan, diff
from hookscope.core.analyses import DiffRequest, LayerPairRequest, ModelBCache
from hookscope.core.base.errors import PlanError
from hookscope.core.base.meaning import OutputMeaning
from hookscope.core.engine import reference_of, version_names
from hookscope.core.plan.interventions import Clamp
from tests.support.hand_hooks import hooked_outputs


def _models():
    torch.manual_seed(0)
    a = nn.Sequential(OrderedDict(fc1=nn.Linear(5, 12), act=nn.ReLU(), fc2=nn.Linear(12, 7),
                                  out=nn.Linear(7, 3))).eval()
    b = copy.deepcopy(a)
    with torch.no_grad():
        b.fc2.weight.add_(0.05)
    return a, b


def _hook_count(module):
    return sum(len(m._forward_hooks) + len(m._forward_pre_hooks) for m in module.modules())


def _close(a, b):
    torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-6)


def test_pairs_hold_both_models_outputs_with_the_plans_interventions_on_both():
    a, b = _models()
    x = torch.randn(4, 5)
    plan = Plan(capture=["out"], interventions={"act": Clamp(None, 0.4)})
    before_a, before_b = _hook_count(a), _hook_count(b)
    req = LayerPairRequest(DiffRequest(b_module=b), ("fc1", "fc2", "out"), "A net")
    got = req.compute(a, x, plan, "cpu", OutputMeaning())
    assert _hook_count(a) == before_a and _hook_count(b) == before_b   # every hook removed
    want_a = hooked_outputs(a, x, ["fc1", "fc2", "out"], ("act", -float("inf"), 0.4))
    want_b = hooked_outputs(b, x, ["fc1", "fc2", "out"], ("act", -float("inf"), 0.4))
    rows = {r.path: r for r in diff(a, b, x, plan=plan).layers}
    for path in ("fc1", "fc2", "out"):
        (rec,) = got.captures[path]
        _close(rec.baseline_tensor, want_a[path])
        _close(rec.tensor, want_b[path])
        assert rec.pair.a == "A net" and rec.pair.b == "a module"
        assert rec.pair.relative_change == pytest.approx(rows[path].relative_change, rel=1e-6)
        assert rec.pair.max_abs_diff == pytest.approx(rows[path].max_abs_diff, rel=1e-6)
        assert reference_of(rec)[2] == "A" and version_names(rec) == ("A", "B")
        assert rec.stats.hist_edges.tolist() == rec.baseline_stats.hist_edges.tolist()
        assert got.display.for_record(rec) is not None   # made in the runner's thread
    # fc1 is before the change: equal, and still drawn as A and B
    assert got.captures["fc1"][0].pair.relative_change == 0
    assert reference_of(got.captures["fc1"][0])[0] is not None
    assert got.captures["fc2"][0].pair.relative_change > 1e-3


def test_model_b_is_built_once_and_kept_until_cleared(tmp_path):
    a, b = _models()
    weights = tmp_path / "b.pt"
    torch.save(b.state_dict(), weights)
    cache = ModelBCache()
    req = LayerPairRequest(DiffRequest(b_weights=str(weights), b_dtype="bfloat16"), ("fc2",),
                           "A", cache)
    x = torch.randn(2, 5)
    first = req.compute(a, x, Plan(), "cpu", OutputMeaning())
    kept = cache.model_b(req.diff, a)
    req.compute(a, x, Plan(), "cpu", OutputMeaning())
    assert cache.model_b(req.diff, a) is kept and kept is not a
    assert next(kept.parameters()).dtype == torch.bfloat16
    assert next(a.parameters()).dtype == torch.float32   # A untouched
    rec = first.captures["fc2"][0]
    assert rec.tensor.dtype == torch.float32 and rec.pair.b == "A with b.pt in bfloat16"
    want = hooked_outputs(b.to(torch.bfloat16), x.to(torch.bfloat16), ["fc2"])["fc2"]
    assert torch.equal(rec.tensor, want.float())   # bfloat16 values upcast exactly
    # a request sent to another process (a Ray actor) carries an empty cache, no model B
    sent = pickle.loads(pickle.dumps(req))
    assert sent == req and not sent.cache.holds
    cache.clear()
    assert not cache.holds


def test_a_layer_model_b_lacks_is_refused_naming_model_b():
    a, _ = _models()
    other = nn.Sequential(OrderedDict(fc1=nn.Linear(5, 12))).eval()
    req = LayerPairRequest(DiffRequest(b_module=other), ("fc2",))
    with pytest.raises(PlanError, match="model B: unknown layer 'fc2'"):
        req.compute(a, torch.randn(1, 5), Plan(), "cpu", OutputMeaning())
    assert _hook_count(a) == 0 and _hook_count(other) == 0

