"""core/fast/hook_dicts.py: a hook put straight into ``_forward_hooks`` behaves as a
registered one, and removing it removes exactly it."""

import torch
from torch import nn

from hookscope.core.fast.hook_dicts import HookSet, add_forward_hook, add_forward_pre_hook

from fast_marks import fast_only  # tests/core is on sys.path

pytestmark = fast_only


def test_runs_after_existing_hooks_and_replaces_the_output():
    lin = nn.Linear(3, 3)
    seen = []
    user = lin.register_forward_hook(lambda m, a, out: seen.append(("user", out.clone())))
    ours = add_forward_hook(lin, lambda m, a, out: out * 0 + 7)
    x = torch.randn(2, 3)
    got = lin(x)
    assert torch.equal(got, torch.full((2, 3), 7.0))
    assert seen[0][0] == "user" and torch.equal(seen[0][1], nn.functional.linear(x, lin.weight, lin.bias))
    ours.remove()
    ours.remove()  # twice is harmless
    assert torch.equal(lin(x), nn.functional.linear(x, lin.weight, lin.bias))
    assert len(lin._forward_hooks) == 1  # the user's is still there
    user.remove()


def test_ids_never_collide_with_registered_handles():
    lin = nn.Linear(2, 2)
    ours = add_forward_hook(lin, lambda *a: None)
    later = lin.register_forward_hook(lambda *a: None)  # takes the next id
    ours.remove()
    assert list(lin._forward_hooks) == [later.id]
    later.remove()
    assert not lin._forward_hooks


class OwnHooks(nn.Linear):
    """A class that registers hooks its own way (TorchScript's do): it must be asked."""

    def __init__(self, *args):
        super().__init__(*args)
        self.asked = []

    def register_forward_hook(self, hook, **kw):
        self.asked.append(hook)
        return super().register_forward_hook(hook, **kw)


def test_a_class_with_its_own_registration_is_asked():
    m = OwnHooks(2, 2)
    fn = lambda *a: None  # noqa: E731
    handle = add_forward_hook(m, fn)
    assert m.asked == [fn]
    handle.remove()
    assert not m._forward_hooks


def test_pre_hooks_and_always_called_hooks():
    lin = nn.Linear(2, 2)
    order = []
    pre = add_forward_pre_hook(lin, lambda m, a: order.append("pre"))
    post = add_forward_hook(lin, lambda m, a, out: order.append("post"), always=True)
    lin(torch.randn(1, 2))
    assert order == ["pre", "post"]
    order.clear()
    try:
        lin(torch.randn(1, 3))  # the forward raises: an always-called hook still runs
    except RuntimeError:
        pass
    assert order == ["pre", "post"]
    pre.remove(), post.remove()
    assert not lin._forward_hooks and not lin._forward_pre_hooks
    assert not lin._forward_hooks_always_called


def test_a_hook_set_removes_exactly_its_own_hooks_and_keeps_the_users_order():
    a, b = nn.Linear(2, 2), nn.Linear(2, 2)
    order = []
    first = a.register_forward_hook(lambda m, i, o: order.append("user first"))
    hooks = HookSet()
    hooks.add(a, lambda m, i, o: order.append("ours a"))
    hooks.add(b, lambda m, i, o: order.append("ours b"))
    later = a.register_forward_hook(lambda m, i, o: order.append("user later"))
    assert len(hooks) == 2
    b(a(torch.randn(1, 2)))
    assert order == ["user first", "ours a", "user later", "ours b"]
    hooks.remove()
    hooks.remove()  # twice is harmless
    assert len(hooks) == 0
    assert list(a._forward_hooks) == [first.id, later.id] and not b._forward_hooks
    order.clear()
    b(a(torch.randn(1, 2)))
    assert order == ["user first", "user later"]


def test_a_hook_set_asks_a_class_with_its_own_registration():
    m, plain = OwnHooks(2, 2), nn.Linear(2, 2)
    fn = lambda *a: None  # noqa: E731
    hooks = HookSet()
    hooks.add(m, fn)
    hooks.add(plain, fn)
    assert m.asked == [fn] and len(hooks) == 2
    hooks.remove()
    assert not m._forward_hooks and not plain._forward_hooks
