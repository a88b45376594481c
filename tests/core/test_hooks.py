"""Hook hygiene: every handle removed on every path, user hooks untouched,
per-call captures, nested outputs, and captures that survive in-place ops."""

from collections import OrderedDict, namedtuple

import sys

import pytest
import torch
from torch import nn

from hookscope.core import ForwardError, HookSession, Plan, compare, run

from fast_marks import fast_only  # tests/core is on sys.path
from tests.support.hand_hooks import hooked_outputs


def hook_dicts(model):
    return {name: (list(m._forward_hooks.items()), list(m._forward_pre_hooks.items()))
            for name, m in model.named_modules()}


def small():
    torch.manual_seed(0)
    return nn.Sequential(OrderedDict(a=nn.Linear(3, 5), act=nn.ReLU(), b=nn.Linear(5, 2)))


def test_hooks_removed_after_run_and_compare():
    m = small()
    before = hook_dicts(m)
    x = torch.randn(2, 3)
    run(m, x, Plan(capture=["a", "b"], clamp={"act": (0, 0.5)}))
    compare(m, x, Plan(capture=["a"], clamp={"a": (-1, 1)}))
    assert hook_dicts(m) == before
    assert all(not mod._forward_hooks for mod in m.modules())


class Boom(nn.Module):
    def __init__(self, exc):
        super().__init__()
        self.lin = nn.Linear(2, 2)
        self.exc = exc

    def forward(self, x):
        x = self.lin(x)
        raise self.exc


def test_hooks_removed_when_forward_raises():
    m = Boom(ValueError("bad thing"))
    with pytest.raises(ForwardError, match="bad thing"):
        compare(m, torch.zeros(1, 2), Plan(capture=["lin"], clamp={"lin": (0, 1)}))
    assert not m.lin._forward_hooks


def test_hooks_removed_on_keyboard_interrupt():
    m = Boom(KeyboardInterrupt())
    with pytest.raises(KeyboardInterrupt):
        run(m, torch.zeros(1, 2), Plan(capture=["lin"]))
    assert not m.lin._forward_hooks


def test_session_removes_partial_registration_on_failure():
    m = small()
    layers = Plan(capture=["a", "b"]).resolve(m)

    class Exploding:
        def register_forward_hook(self, hook):
            raise RuntimeError("cannot register")

    layers["b"].module = Exploding()
    with pytest.raises(RuntimeError):
        with HookSession(layers):
            pass
    assert not m.a._forward_hooks


def test_user_hooks_kept_in_order():
    m = small()
    seen = []
    h1 = m.a.register_forward_hook(lambda *_: seen.append("user1"))
    h2 = m.a.register_forward_hook(lambda *_: seen.append("user2"))
    before = list(m.a._forward_hooks.items())
    compare(m, torch.randn(1, 3), Plan(capture=["a"], clamp={"a": (0, 0.1)}))
    assert list(m.a._forward_hooks.items()) == before
    seen.clear()
    m(torch.randn(1, 3))
    assert seen == ["user1", "user2"]
    h1.remove(), h2.remove()


class Reuse(nn.Module):
    """One Linear called three times, and reachable by two paths."""

    def __init__(self):
        super().__init__()
        self.shared = nn.Linear(4, 4)
        self.alias = self.shared

    def forward(self, x):
        return self.alias(self.shared(self.shared(x)))


def test_reused_module_records_every_call():
    torch.manual_seed(1)
    m = Reuse()
    x = torch.randn(1, 4)
    r = run(m, x, Plan(capture=["shared"]))
    recs = r.captures["shared"]
    assert [rec.call for rec in recs] == [0, 1, 2]
    y1 = m.shared(x)
    y2 = m.shared(y1)
    y3 = m.shared(y2)
    for rec, ref in zip(recs, (y1, y2, y3)):
        assert torch.equal(rec.tensor, ref.detach())
    assert r.calls["shared"] == 3


def test_second_path_maps_to_the_same_module():
    m = Reuse()
    r = run(m, torch.randn(1, 4), Plan(capture=["alias"]))
    assert list(r.captures) == ["shared"] and len(r.captures["shared"]) == 3
    assert not m.shared._forward_hooks


Pair = namedtuple("Pair", "main aux")


class Nested(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 3)

    def forward(self, x):
        y = self.lin(x)
        return {"pair": Pair(y, y * 2), "meta": "text", "n": 3}


class UsesNested(nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = Nested()

    def forward(self, x):
        out = self.inner(x)
        assert out["meta"] == "text" and out["n"] == 3  # non-tensor leaves pass through
        return out["pair"].main + out["pair"].aux


def test_nested_outputs_captured_and_clamped():
    torch.manual_seed(2)
    m = UsesNested()
    x = torch.randn(2, 3) * 3
    r = compare(m, x, Plan(capture=["inner"], clamp={"inner": (-0.5, 0.5)}))
    rec = r.captures["inner"][0]
    y = m.inner.lin(x).detach()
    assert rec.leaf == "['pair'][0]"
    assert set(rec.leaf_shapes) == {"['pair'][0]", "['pair'][1]"}
    assert torch.equal(rec.tensor, y.clamp(-0.5, 0.5))
    assert torch.equal(rec.pre_tensor, y)
    assert torch.equal(r.output_with, y.clamp(-0.5, 0.5) + (2 * y).clamp(-0.5, 0.5))
    assert r.outputs_differ


class InPlace(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.bn = nn.BatchNorm1d(4)
        self.relu = nn.ReLU(inplace=True)
        self.lin2 = nn.Linear(4, 4)

    def forward(self, x):
        y = self.relu(self.bn(self.lin(x)))   # relu overwrites bn's output
        z = self.lin2(y)
        z += 1.0                              # overwrites lin2's output
        return z


def test_captures_survive_later_inplace_ops():
    torch.manual_seed(3)
    m = InPlace().eval()
    x = torch.randn(5, 4)
    paths = ["lin", "bn", "relu", "lin2"]
    ref = hooked_outputs(m, x, paths)
    assert (ref["bn"] < 0).any()  # the test means something only if relu changes values
    for attempt in range(2):  # first run learns, second copies only what needs it
        r = run(m, x, Plan(capture=paths))
        for p in paths:
            assert torch.equal(r.captures[p][0].tensor, ref[p]), (attempt, p)
    assert set(r.recaptured) == set() and {p for p in paths if r.captures[p][0].copied} == {"bn", "lin2"}


def test_stats_only_keeps_no_tensors_but_right_stats():
    torch.manual_seed(4)
    m = InPlace().eval()
    x = torch.randn(5, 4)
    ref = hooked_outputs(m, x, ["bn"])["bn"]
    r = run(m, x, Plan(capture=["bn", "lin2"], keep_tensors=False))
    rec = r.captures["bn"][0]
    assert rec.tensor is None and rec.nbytes == 0
    assert rec.stats.min == pytest.approx(float(ref.min()))  # taken before relu overwrote it
    assert rec.stats.mean == pytest.approx(float(ref.mean()), abs=1e-6)


@fast_only
def test_kernel_summaries_become_the_records_init_would_build():
    """Statistics only, every capture summarised by the kernel in the forward: finish()
    builds each record with CaptureRecord.of_stats, which must equal __init__'s."""
    from hookscope.core.fast import onepass
    from hookscope.core.engine.capture_record import CaptureRecord
    from hookscope.core.fast.stats_plain import plain_moments, plain_pending

    if onepass.KERNEL is None:
        pytest.skip(f"no kernel here: {onepass.which()}")
    torch.manual_seed(5)
    m = nn.Sequential(OrderedDict(a=nn.Linear(6, 300), act=nn.Tanh(), b=nn.Linear(300, 40)))
    x = torch.randn(70, 6)
    r = run(m, x, Plan(capture=["a", "act", "b"], keep_tensors=False))
    outs = {}
    hooks = [getattr(m, n).register_forward_hook(lambda mod, a, o, n=n: outs.__setitem__(n, o.detach()))
             for n in ("a", "act", "b")]
    with torch.no_grad():
        m(x)
    for h in hooks:
        h.remove()
    for name, out in outs.items():
        got = plain_moments(out)
        assert got is not None  # the kernel's path, which of_stats serves
        fast = r.captures[name][0]
        assert fast.shape == tuple(out.shape)  # before the summary is laid out
        slow = CaptureRecord(name, 0, plain_pending(got), leaf_shapes={"": got[0]})
        for slot in CaptureRecord.__slots__:
            slot = "leaf_shapes" if slot == "_leaf_shapes" else slot  # made on first read
            if slot != "_stats":
                assert getattr(fast, slot) == getattr(slow, slot), slot
        assert fast.stats.to_dict(with_histogram=True) == slow.stats.to_dict(with_histogram=True)
        assert fast.stats.min == pytest.approx(float(out.min()))
        assert fast.stats.std == pytest.approx(float(out.std(unbiased=False)), rel=1e-5)
        assert int(fast.stats.hist_counts.sum()) == min(out.numel(), 1 << 14)


@pytest.mark.parametrize("guarded", [False, pytest.param(True, marks=fast_only)])
def test_kept_bare_tensors_become_the_records_init_would_build(guarded, monkeypatch):
    """Every leaf kept on the CPU, no intervention: the hooks append raw entries (a
    first run under the in-place guard: pending captures it watches) and finish()
    builds each record with CaptureRecord.of_kept, which must equal __init__'s,
    copies of in-place victims and their statistics included."""
    import hookscope.core.fast.inplace_guard as iv
    from hookscope.core.engine.capture_record import CaptureRecord

    if guarded:
        monkeypatch.setattr(iv, "GUARD_FROM_PARAMS", 0)
    else:
        monkeypatch.delitem(sys.modules, "torch._dynamo", raising=False)
        monkeypatch.setattr(iv, "GUARD_FROM_PARAMS", 10**12)
    torch.manual_seed(6)
    m = nn.Sequential(OrderedDict(a=nn.Linear(6, 30), act=nn.ReLU(inplace=True), b=nn.Linear(30, 4))).eval()
    x = torch.randn(9, 6)
    paths = ["a", "act", "b"]
    ref = hooked_outputs(m, x, paths)
    for attempt in range(3):  # learning the victim (a, overwritten by act), then steady runs
        r = run(m, x, Plan(capture=paths))
        for name in paths:
            fast = r.captures[name][0]
            assert torch.equal(fast.tensor, ref[name]), (attempt, name)
            slow = CaptureRecord(name, 0, tensor=fast.tensor, leaf_shapes={"": tuple(ref[name].shape)},
                                 copied=fast.copied, lazy=True)
            for slot in CaptureRecord.__slots__:
                slot = "leaf_shapes" if slot == "_leaf_shapes" else slot  # made on first read
                assert getattr(fast, slot) is getattr(slow, slot) or getattr(fast, slot) == getattr(slow, slot), slot
            assert fast.stats.to_dict(with_histogram=True) == slow.stats.to_dict(with_histogram=True)
            assert fast.stats.min == pytest.approx(float(ref[name].min()))
        assert r.captures["a"][0].copied and not r.captures["b"][0].copied
        assert r.calls == {"a": 1, "act": 1, "b": 1}
        # Learned in the first forward under the guard; by a second one without it.
        assert r.recaptured == (() if guarded or attempt else ("a",)), attempt


def test_cpu_captures_summarise_on_first_read():
    torch.manual_seed(5)
    m = small()
    x = torch.randn(4, 3)
    r = run(m, x, Plan(capture=["a"], clamp={"a": (-0.2, 0.2)}))
    rec = r.captures["a"][0]
    assert not rec.stats_ready  # nothing summarised inside the forward
    pre = m.a(x).detach()
    assert rec.pre_stats.min == pytest.approx(float(pre.min()))
    assert rec.stats_ready and rec.stats.max == pytest.approx(0.2)
    frac = float(((pre < -0.2) | (pre > 0.2)).float().mean())
    assert rec.stats.fraction_clamped == pytest.approx(frac)
    r2 = run(m, x, Plan(capture=["a"], keep_tensors=False))
    assert r2.captures["a"][0].stats_ready  # stats-only: summarised in the forward


def test_baseline_carries_only_inert_hooks():
    # A transformer layer takes its fused path only without hooks; the baseline must
    # take the same kernels as the hooked run, and leave nothing behind.
    from hookscope.core import load_model

    lm = load_model("demo:transformer")
    before = hook_dicts(lm.module)
    r = compare(lm.module, lm.example_input, Plan(capture=["encoder.layers.1.linear1"]))
    assert not r.outputs_differ and r.max_abs_diff == 0.0
    assert hook_dicts(lm.module) == before


def test_accelerator_path_summarises_before_the_copy(monkeypatch):
    # Off the CPU, kept captures are summarised in finish() on their device; the
    # same code runs here on the CPU when the check says "not on read".
    import hookscope.core.engine.hooks as hooks

    monkeypatch.setattr(hooks, "summarized_on_read", lambda t: False)
    torch.manual_seed(6)
    m = small()
    x = torch.randn(4, 3)
    r = run(m, x, Plan(capture=["a"], clamp={"a": (-0.2, 0.2)}))
    rec = r.captures["a"][0]
    assert rec.stats_ready
    pre = m.a(x).detach()
    assert rec.pre_stats.max == pytest.approx(float(pre.max()))
    assert rec.stats.max == pytest.approx(0.2)
    np_edges = rec.pre_stats.hist_edges
    assert (rec.stats.hist_edges == np_edges).all()


def test_clamp_keeps_integer_outputs_integer():
    from hookscope.core import Clamp

    t = torch.tensor([1, 2, 3, 7])
    out = Clamp(1.5, 6.5).apply(t)
    assert out.dtype == torch.int64 and out.tolist() == [2, 2, 3, 6]
    assert Clamp(float("-inf"), float("inf")).apply(t) is t
    assert Clamp(-0.5, 0.5).apply(torch.tensor([True, False])).dtype == torch.bool  # untouched
