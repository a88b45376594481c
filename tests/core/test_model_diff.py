"""The model diff (hookscope.core.diff, DiffRequest, Session.diff) against hand-hooked models."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

from hookscope.core import (DiffRequest, DiffResult, HookscopeError, Plan, PlanError, Session,
                            diff, get_analysis, load_model)
from hookscope.core.analyses import DEFAULT_TOLERANCE

from tests.support.hand_hooks import hooked_outputs


def hook_count(module: nn.Module) -> int:
    return sum(len(m._forward_hooks) + len(m._forward_pre_hooks) for m in module.modules())


def nudged_weights(tmp_path, lm, layer: str = "conv2", by: float = 1e-2, seed: int = 1):
    """A state_dict of ``lm`` with ``layer``'s weight nudged, written to tmp_path."""
    state = {k: v.clone() for k, v in lm.module.state_dict().items()}
    g = torch.Generator().manual_seed(seed)
    w = state[f"{layer}.weight"]
    state[f"{layer}.weight"] = w + by * torch.randn(w.shape, generator=g)
    path = tmp_path / f"{layer}_nudged.pt"
    torch.save(state, path)
    return path, state


def test_cnn_with_conv2_nudged(tmp_path):
    lm = load_model("demo:cnn")
    path, state = nudged_weights(tmp_path, lm)
    before = hook_count(lm.module)
    got = diff(lm, weights=str(path))
    assert isinstance(got, DiffResult) and hook_count(lm.module) == before
    paths = [r.path for r in got.layers]
    assert paths == ["conv1", "bn1", "relu1", "pool1", "conv2", "bn2", "relu2", "pool2",
                     "flatten", "fc"]
    for r in got.layers[:4]:
        assert r.max_abs_diff == 0.0 and r.relative_change == 0.0, r
    first = got.first_divergent
    assert first is not None and first.path == "conv2" and first.call == 0

    # by hand: two models, a plain hook on conv2 in each
    b = copy.deepcopy(lm.module)
    b.load_state_dict(state)
    a_out = hooked_outputs(lm.module, lm.example_input, ["conv2"])["conv2"]
    b_out = hooked_outputs(b, lm.example_input, ["conv2"])["conv2"]
    assert first.max_abs_diff == float((a_out - b_out).abs().max())
    rel = float((a_out.double() - b_out.double()).norm() / a_out.double().norm())
    assert first.relative_change == pytest.approx(rel, rel=1e-4)
    cos = torch.nn.functional.cosine_similarity(a_out.double().flatten(), b_out.double().flatten(), 0)
    assert first.cosine == pytest.approx(float(cos), abs=1e-6)

    # a tolerance above every change names no layer
    top = max(r.relative_change for r in got.layers)
    quiet = diff(lm, weights=str(path), tolerance=top * 1.01)
    assert quiet.first_divergent is None and quiet.to_json_dict()["first_divergent"] is None
    assert [r.max_abs_diff for r in quiet.layers] == [r.max_abs_diff for r in got.layers]
    # the caller's model kept its own weights
    torch.testing.assert_close(lm.module.conv2.weight, load_model("demo:cnn").module.conv2.weight,
                               rtol=0, atol=0)


def test_cnn_against_itself_in_bfloat16():
    lm = load_model("demo:cnn")
    got = diff(lm, dtype="bfloat16")
    assert len(got.layers) == 10 and lm.module.conv1.weight.dtype == torch.float32
    # bfloat16 keeps 8 bits of mantissa (~4e-3 relative rounding): each layer moves by about
    # that, never by nothing and never by a lot (measured: 2.4e-3 .. 9.1e-3)
    for r in got.layers:
        assert 1e-4 < r.relative_change < 3e-2, r
        assert r.cosine is not None and r.cosine > 0.999
    assert got.first_divergent is not None and got.first_divergent.path == "conv1"
    assert got.tolerance == DEFAULT_TOLERANCE
    assert any("bfloat16" in n for n in got.notes)
    assert got.output["top1_agreement"] == 1.0
    assert [c["index"] for c in got.output["top_a"][0]][:1] == [c["index"] for c in
                                                               got.output["top_b"][0]][:1]


def test_gpt2_with_one_mlp_changed(tmp_path):
    pytest.importorskip("transformers")
    from hf_models import gpt2

    folder = gpt2(tmp_path / "gpt2")
    lm = load_model(f"hf:{folder}")
    b = copy.deepcopy(lm.module)
    with torch.no_grad():
        g = torch.Generator().manual_seed(3)
        w = b.transformer.h[1].mlp.c_fc.weight
        w.add_(0.2 * torch.randn(w.shape, generator=g))
    before_a, before_b = hook_count(lm.module), hook_count(b)
    got = diff(lm, b, "text:the cat sat on the mat")
    assert hook_count(lm.module) == before_a and hook_count(b) == before_b
    block0 = [r for r in got.layers if not r.path.startswith(("transformer.h.1", "transformer.ln_f",
                                                                "lm_head"))]
    assert any(r.path.startswith("transformer.h.0.") for r in block0)
    for r in block0:
        assert r.max_abs_diff == 0.0, r
    assert got.first_divergent is not None
    assert got.first_divergent.path == "transformer.h.1.mlp.c_fc"
    assert not got.only_in_a and not got.only_in_b

    # by hand: the two models' logits, KL(A||B) per position and the top-1 agreement
    ids = torch.tensor([lm.meaning.codec.encode("the cat sat on the mat")])
    with torch.inference_mode():
        la = lm.module(input_ids=ids).logits.double().log_softmax(-1)
        lb = b(input_ids=ids).logits.double().log_softmax(-1)
    kl = (la.exp() * (la - lb)).sum(-1)
    torch.testing.assert_close(torch.tensor(got.output["kl_per_position"], dtype=torch.float64), kl,
                               rtol=1e-6, atol=1e-12)
    assert got.output["top1_agreement"] == float((la.argmax(-1) == lb.argmax(-1)).double().mean())
    assert len(got.output["kl_per_position"][0]) == ids.shape[1]


def test_interventions_apply_to_both(tmp_path):
    lm = load_model("demo:cnn")
    path, _ = nudged_weights(tmp_path, lm)
    # fc clamped to [0, 0] in both models: both outputs are zeros, whatever conv2 did
    got = diff(lm, weights=str(path), plan=Plan(clamp={"fc": (0.0, 0.0)}))
    fc = [r for r in got.layers if r.path == "fc"][0]
    assert fc.max_abs_diff == 0.0 and got.output["max_abs_diff"] == 0.0
    assert got.first_divergent is not None and got.first_divergent.path == "conv2"


def test_the_capture_budget_is_checked_and_every_hook_goes():
    lm = load_model("demo:cnn")
    b = copy.deepcopy(lm.module)
    before_a, before_b = hook_count(lm.module), hook_count(b)
    # conv1's output is 8 x 8 x 8 float32 (2 KiB), and so is bn1's: the second passes 3000 B
    with pytest.raises(HookscopeError, match="memory budget of 2.9 KiB at layer 'bn1'"):
        diff(lm, b, budget_bytes=3000)
    assert hook_count(lm.module) == before_a and hook_count(b) == before_b
    assert diff(lm, b, budget_bytes=1 << 20).first_divergent is None


def test_no_layer_in_common_and_directions():
    a = nn.Sequential(nn.Linear(4, 3), nn.ReLU())
    b = nn.Sequential()
    b.add_module("fc", nn.Linear(4, 3))
    x = torch.randn(2, 4)
    with pytest.raises(PlanError, match="no layer in common"):
        diff(a, b, x)
    assert hook_count(a) == 0 and hook_count(b) == 0
    a2 = copy.deepcopy(a)
    with torch.no_grad():
        a2[0].bias.add_(0.5)
    got = diff(a, a2, x, directions=("0",))
    with torch.no_grad():
        want = (a2[0](x) - a[0](x)).mean(0)
    torch.testing.assert_close(got.directions["0"], want, rtol=1e-6, atol=1e-6)
    with pytest.raises(PlanError, match="--save-direction 'nope'"):
        diff(a, a2, x, directions=("nope",))


def test_through_the_session_and_the_registry(tmp_path):
    lm = load_model("demo:cnn")
    path, _ = nudged_weights(tmp_path, lm)
    assert get_analysis("diff") is DiffRequest
    want = diff(lm, weights=str(path))
    s = Session.load("demo:cnn")
    try:
        got = s.diff(weights=str(path))
        direct = s.analyse(DiffRequest(b_weights=str(path), tolerance=10.0))
    finally:
        s.close()
    assert [(r.path, r.max_abs_diff) for r in got.layers] == \
        [(r.path, r.max_abs_diff) for r in want.layers]
    assert got.first_divergent.path == "conv2" and direct.first_divergent is None
    with pytest.raises(PlanError, match="choose one of"):
        DiffRequest(b_dtype="float8")


def test_a_model_b_that_fails_leaves_no_hook():
    a = nn.Sequential(nn.Linear(4, 3), nn.ReLU())
    b = nn.Sequential(nn.Linear(5, 3), nn.ReLU())
    with pytest.raises(HookscopeError, match="model B cannot take the input"):
        diff(a, b, torch.randn(2, 4))
    assert hook_count(a) == 0 and hook_count(b) == 0


class _NanAt(nn.Module):
    """A leaf whose output is NaN at one place and +inf at another, whatever the weights."""

    def forward(self, x):
        y = x.clone()
        y[..., 0] = float("nan")
        y[..., 1] = float("inf")
        return y


def test_nan_and_inf_in_the_same_places_count_as_equal():
    a = nn.Sequential(nn.Linear(4, 4), _NanAt(), nn.Linear(4, 2))
    b = copy.deepcopy(a)
    with torch.no_grad():
        b[2].weight.add_(0.1)
    got = diff(a, b, torch.randn(3, 4))
    rows = {r.path: r for r in got.layers}
    assert rows["0"].max_abs_diff == 0 and rows["1"].max_abs_diff == 0
    assert rows["1"].relative_change == 0
    # the last layer reads the NaN: all NaN in both, the same places, is no difference either
    assert rows["2"].max_abs_diff == 0 and got.first_divergent is None
    assert got.output["max_abs_diff"] == 0


def test_layers_only_one_model_has():
    torch.manual_seed(0)
    a = nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.Identity())
    b = nn.Sequential(copy.deepcopy(a[0]), nn.ReLU())
    b.add_module("extra", nn.Identity())
    got = diff(a, b, torch.randn(2, 4))
    assert [r.path for r in got.layers] == ["0", "1"]
    assert got.only_in_a == ("2",) and got.only_in_b == ("extra",)
    assert got.first_divergent is None and got.output["max_abs_diff"] == 0
    data = got.to_json_dict()
    assert data["only_in_a"] == ["2"] and data["only_in_b"] == ["extra"]


class _Twice(nn.Module):
    """One ReLU called twice: its calls are aligned by number."""

    def __init__(self):
        super().__init__()
        self.fc1, self.relu, self.fc2 = nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 4)

    def forward(self, x):
        return self.relu(self.fc2(self.relu(self.fc1(x))))


def test_a_module_called_twice_is_aligned_call_by_call():
    torch.manual_seed(0)
    a = _Twice()
    b = copy.deepcopy(a)
    with torch.no_grad():
        b.fc2.bias.add_(0.5)
    x = torch.randn(3, 4)
    got = diff(a, b, x)
    assert [(r.path, r.call) for r in got.layers] == [("fc1", 0), ("relu", 0), ("fc2", 0),
                                                     ("relu", 1)]
    assert got.layers[1].max_abs_diff == 0 and got.layers[3].max_abs_diff > 0
    assert (got.first_divergent.path, got.first_divergent.call) == ("fc2", 0)
    with torch.no_grad():
        want = (b(x) - a(x)).abs().max()
    assert got.layers[3].max_abs_diff == float(want)
