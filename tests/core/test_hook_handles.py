"""The reference path's hooks (core/engine/hook_handles.py, HookSession): registered
with torch's public API, every one removed on every path, errors included."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from hookscope.core import HookSession, Plan
from hookscope.core.engine.hook_handles import HandleStack


def test_a_stack_removes_exactly_its_own_hooks_newest_first():
    a, b = nn.Linear(2, 2), nn.Linear(2, 2)
    order = []
    user = a.register_forward_hook(lambda m, i, o: order.append("user"))
    hooks = HandleStack()
    hooks.add(a, lambda m, i, o: order.append("ours a"))
    hooks.add_pre(b, lambda m, i: order.append("ours pre b"))
    assert len(hooks) == 2
    b(a(torch.randn(1, 2)))
    assert order == ["user", "ours a", "ours pre b"]
    hooks.remove()
    hooks.remove()  # twice is harmless
    assert len(hooks) == 0
    assert list(a._forward_hooks) == [user.id] and not b._forward_pre_hooks


def test_a_handle_that_fails_to_go_leaves_the_others_removed():
    lin = nn.Linear(2, 2)

    class Stubborn:
        def remove(self):
            raise RuntimeError("cannot remove")

    hooks = HandleStack()
    hooks.add(lin, lambda *a: None)
    hooks.keep(Stubborn())
    hooks.add_pre(lin, lambda *a: None)
    with pytest.raises(RuntimeError, match="cannot remove"):
        hooks.remove()
    assert not lin._forward_hooks and not lin._forward_pre_hooks


class RefusesHooks(nn.Linear):
    """Registration fails on this module: arming a plan must roll back what it added."""

    def register_forward_hook(self, hook, **kw):
        raise RuntimeError("no hooks here")


def test_a_failure_half_way_through_arming_rolls_back_every_hook():
    model = nn.Sequential(nn.Linear(2, 2), nn.Linear(2, 2), RefusesHooks(2, 2))
    layers = Plan(capture=["0", "1", "2"]).resolve(model)
    session = HookSession(layers)
    with pytest.raises(RuntimeError, match="no hooks here"):
        session.__enter__()
    assert all(not m._forward_hooks for m in model.modules())
    assert session.active_hooks == 0


def test_keyboard_interrupt_in_the_forward_removes_every_hook():
    model = nn.Sequential(nn.Linear(2, 2), nn.ReLU(), nn.Linear(2, 2))

    def interrupt(m, args):
        raise KeyboardInterrupt

    model[2].register_forward_pre_hook(interrupt)
    with pytest.raises(KeyboardInterrupt):
        with HookSession(Plan(capture=["0", "1", "2"], clamp={"1": (0.0, 1.0)}).resolve(model)) as s:
            assert s.active_hooks == 3
            model(torch.randn(1, 2))
    assert all(not m._forward_hooks for m in model.modules())
    assert len(model[2]._forward_pre_hooks) == 1  # the user's stays
