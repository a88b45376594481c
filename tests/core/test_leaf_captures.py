"""Every tensor leaf of a nested layer output is summarised, each by its name.

The record of a call is its output's first tensor leaf; ``extra_leaves`` holds
the others. Every leaf's statistics (after, before the intervention, baseline)
are checked against torch on the values a plain forward hook saw.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from hookscope.core import Clamp, Plan, compare
from hookscope.core.export.export import save_captures
from hookscope.core.plan.interventions import Scale
from hookscope.core.engine.verdict import output_verdict

from nested_models import DataclassNet, DictNet, LSTMNet, make, run_hand  # tests/core is on sys.path


def assert_stats(s, t: torch.Tensor) -> None:
    """``s`` summarises ``t`` (torch's own reductions, in float64)."""
    d = t.double()
    assert s.shape == tuple(t.shape)
    assert s.count == t.numel()
    assert s.min == pytest.approx(float(d.min()), abs=1e-6)
    assert s.max == pytest.approx(float(d.max()), abs=1e-6)
    assert s.mean == pytest.approx(float(d.mean()), rel=1e-5, abs=1e-6)
    assert s.std == pytest.approx(float(d.std(correction=0)), rel=1e-5, abs=1e-6)


def check_leaves(rec, pre: dict, post: dict, base: dict, kept: bool) -> None:
    assert [r.leaf for r in rec.leaves] == list(post)
    assert rec.leaf == next(iter(post)) and rec.leaves[0] is rec
    for r in rec.leaves:
        assert (r.path, r.call, r.intervention) == (rec.path, rec.call, rec.intervention)
        assert_stats(r.stats, post[r.leaf])
        assert_stats(r.baseline_stats, base[r.leaf])
        if rec.intervention:
            assert_stats(r.pre_stats, pre[r.leaf])
            changed = float((pre[r.leaf] != post[r.leaf]).double().mean())
            assert r.stats.fraction_changed == pytest.approx(changed)
        if kept:
            assert torch.equal(r.tensor, post[r.leaf])
            assert torch.equal(r.baseline_tensor, base[r.leaf])
            if rec.intervention:
                assert torch.equal(r.pre_tensor, pre[r.leaf])
        else:
            assert r.tensor is None and r.pre_tensor is None and r.baseline_tensor is None


@pytest.mark.parametrize("keep", [True, False], ids=["kept", "stats-only"])
@pytest.mark.parametrize("kind", [LSTMNet, DictNet, DataclassNet], ids=lambda k: k.__name__)
def test_every_leaf_clamped_and_summarised_as_a_hand_hook_sees_it(kind, keep):
    model, x = make(kind)
    lo, hi = -0.2, 0.3
    r = compare(model, x, Plan(capture=["inner"], clamp={"inner": (lo, hi)}, keep_tensors=keep))
    y_base, base, _, _ = run_hand(model, "inner", x)
    y, pre, post, _ = run_hand(model, "inner", x, lambda t: t.clamp(lo, hi))
    torch.testing.assert_close(r.output_with, y)  # every float leaf is clamped, as before
    torch.testing.assert_close(r.output_without, y_base)
    (rec,) = r.captures["inner"]
    assert len(rec.extra_leaves) == len(post) - 1
    check_leaves(rec, pre, post, base, keep)
    assert set(rec.leaf_shapes) == set(post)
    if keep:
        assert r.captured_bytes == sum(3 * t.element_size() * t.numel() for t in post.values())


@pytest.mark.parametrize("kind", [LSTMNet, DictNet, DataclassNet], ids=lambda k: k.__name__)
def test_a_change_upstream_shows_in_every_leaf_against_its_baseline(kind):
    model, x = make(kind, seed=1)
    first = next(n for n, m in model.named_children() if n != "inner" and isinstance(m, nn.Linear)) \
        if kind is DictNet else None
    if first is None:  # no layer before inner: scale inner itself
        plan = Plan(capture=["inner"], interventions={"inner": Scale(1.5)})
        _, base, _, _ = run_hand(model, "inner", x)
        _, pre, post, _ = run_hand(model, "inner", x, lambda t: t * 1.5)
    else:
        plan = Plan(capture=["inner"], interventions={first: Scale(0.5)})
        _, base, _, _ = run_hand(model, "inner", x)
        handle = model.get_submodule(first).register_forward_hook(lambda _m, _a, o: o * 0.5)
        try:
            _, pre, post, _ = run_hand(model, "inner", x)
        finally:
            handle.remove()
    r = compare(model, x, plan)
    check_leaves(r.captures["inner"][0], pre, post, base, kept=True)


def test_single_tensor_outputs_have_no_extra_leaves():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 4), nn.ReLU())
    r = compare(model, torch.randn(2, 3), Plan(capture=["0", "1"], clamp={"0": (-0.1, 0.1)}))
    for recs in r.captures.values():
        assert recs[0].extra_leaves == () and recs[0].leaves == (recs[0],)
        assert recs[0].leaf == "" and recs[0].leaf_record("") is recs[0]


@pytest.mark.parametrize("guarded", [False, True], ids=["version-counters", "guard"])
def test_a_leaf_changed_in_place_later_is_kept_as_it_was(guarded, monkeypatch):
    import hookscope.core.fast.inplace_guard as iv

    if guarded:  # the in-place guard as a big model gets it: the victim copied in one forward
        monkeypatch.setattr(iv, "GUARD_FROM_PARAMS", 0)

    class Pair(nn.Module):
        def forward(self, x):
            return x * 2, x + 1

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = Pair()

        def forward(self, x):
            a, b = self.inner(x)
            b.mul_(10)  # overwrites the second leaf after it was captured
            return a + b

    x = torch.randn(2, 3)
    net = Net()
    for _ in range(2):  # the first run learns the victim, the second copies at capture
        r = compare(net, x, Plan(capture=["inner"]))
        rec = r.captures["inner"][0]
        assert rec.leaf_record("[1]").copied
        if guarded:  # copied before the write, in the same forward: no second one
            assert r.recaptured == ()
        assert torch.equal(rec.leaf_record("[1]").tensor, x + 1)
        assert_stats(rec.leaf_record("[1]").stats, x + 1)
        assert torch.equal(r.output_with, x * 2 + (x + 1) * 10)


def test_saved_captures_have_one_key_per_leaf(tmp_path):
    model, x = make(LSTMNet)
    r = compare(model, x, Plan(capture=["inner"], clamp={"inner": (-0.2, 0.2)}))
    _, pre, post, _ = run_hand(model, "inner", x, lambda t: t.clamp(-0.2, 0.2))
    saved = np.load(save_captures(r.captures, tmp_path / "c.npz"))
    assert sorted(saved.files) == sorted(
        f"inner#0{'' if n == '[0]' else n}{s}" for n in post for s in ("", ":before", ":baseline"))
    for n in post:
        key = f"inner#0{'' if n == '[0]' else n}"
        np.testing.assert_array_equal(saved[key], post[n].numpy())
        np.testing.assert_array_equal(saved[f"{key}:before"], pre[n].numpy())
    pytest.importorskip("safetensors")
    from safetensors.torch import load_file

    st = load_file(str(save_captures(r.captures, tmp_path / "c.safetensors")))
    assert set(st) == set(saved.files)
    assert torch.equal(st["inner#0[1][1]"], post["[1][1]"])


def test_json_lists_every_leaf():
    model, x = make(DictNet)
    r = compare(model, x, Plan(capture=["inner"], clamp={"inner": (-0.2, 0.2)}))
    _, pre, post, _ = run_hand(model, "inner", x, lambda t: t.clamp(-0.2, 0.2))
    d = r.to_json_dict()["captures"]["inner"][0]
    assert d["leaf"] == "['hidden']"
    assert list(d["other_leaves"]) == ["['pair'][0]", "['pair'][1]"]
    for name, got in [("['hidden']", d), *d["other_leaves"].items()]:
        t = post[name].double()
        assert got["shape"] == list(t.shape)
        assert got["min"] == pytest.approx(float(t.min())) and got["max"] == pytest.approx(float(t.max()))
        assert got["baseline"]["mean"] == pytest.approx(float(pre[name].double().mean()), abs=1e-6)


def test_gpt2_attention_block_every_leaf():
    pytest.importorskip("transformers", reason="transformers is not installed")
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    cfg = GPT2Config(n_layer=1, n_embd=16, n_head=2, vocab_size=40, n_positions=16,
                     bos_token_id=0, eos_token_id=0)
    model = GPT2LMHeadModel(cfg).eval()
    model.config._attn_implementation = "eager"  # returns its attention weights too
    x = torch.tensor([[1, 5, 9, 3, 7]])
    path = "transformer.h.0.attn"
    r = compare(model, x, Plan(capture=[path], clamp={path: (-0.05, 0.05)}))
    hook_out = {}

    def grab(change):
        def hook(_m, _a, o):
            hook_out["pre"] = [t.detach().clone() for t in o if isinstance(t, torch.Tensor)]
            if change:
                return tuple(t.clamp(-0.05, 0.05) if isinstance(t, torch.Tensor) else t for t in o)
        return hook

    values = {}
    for name, change in (("base", False), ("with", True)):
        h = model.get_submodule(path).register_forward_hook(grab(change))
        try:
            with torch.no_grad():
                out = model(x)
        finally:
            h.remove()
        values[name] = hook_out["pre"]
    torch.testing.assert_close(r.output_with.logits, out.logits)
    rec = r.captures[path][0]
    assert [q.leaf for q in rec.leaves] == ["[0]", "[1]"]
    assert rec.leaf_record("[1]").shape == (1, 2, 5, 5)
    for q, pre_t, base_t in zip(rec.leaves, values["with"], values["base"], strict=True):
        assert_stats(q.stats, pre_t.clamp(-0.05, 0.05))
        assert_stats(q.pre_stats, pre_t)
        assert_stats(q.baseline_stats, base_t)


def test_the_verdict_counts_a_change_in_any_leaf():
    class Pair(nn.Module):
        def forward(self, x):
            return x * 0.1, x * 10  # only the second leaf passes the bounds

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = Pair()

        def forward(self, x):
            return self.inner(x)[0]  # ... and the model ignores it

    x = torch.ones(1, 4)
    r = compare(Net(), x, Plan(capture=["inner"], clamp={"inner": (-1.0, 1.0)}))
    assert not r.outputs_differ
    rec = r.captures["inner"][0]
    assert rec.stats.fraction_changed == 0 and rec.leaf_record("[1]").stats.fraction_changed == 1
    assert "changed 100% of inner[1]'s values" in output_verdict(r)
    r2 = compare(Net(), x, Plan(capture=["inner"], clamp={"inner": (-20.0, 20.0)}))
    assert "clamp(-20, 20) on inner changed no value" in output_verdict(r2)
