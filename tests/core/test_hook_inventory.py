"""The hook inventory lists every hook on a model, marks whose it is, and sees leaks."""

from __future__ import annotations

import functools

import torch
from torch import nn

from hookscope.core import HookSession, Plan
from hookscope.core.model.hook_inventory import GLOBAL_PATH, leaked_hooks, list_hooks


def _model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))


def user_forward_hook(module, args, output):
    return None


def user_pre_hook(module, args):
    return None


def test_lists_each_kind_on_its_module_with_name_file_and_owner():
    model = _model()
    handles = [model[0].register_forward_hook(user_forward_hook),
               model[2].register_forward_pre_hook(functools.partial(user_pre_hook)),
               model[1].register_full_backward_hook(lambda m, gi, go: None)]
    try:
        got = {(h.path, h.kind): h for h in list_hooks(model, include_global=False)}
        assert set(got) == {("0", "forward hook"), ("2", "forward pre-hook"), ("1", "backward hook")}
        fwd = got[("0", "forward hook")]
        assert fwd.name == "user_forward_hook" and fwd.owner == "user"
        assert fwd.file == __file__ and fwd.line == user_forward_hook.__code__.co_firstlineno
        assert got[("2", "forward pre-hook")].name == "user_pre_hook"   # the partial unwrapped
        assert "<lambda>" in got[("1", "backward hook")].name
    finally:
        for h in handles:
            h.remove()
    assert list_hooks(model, include_global=False) == []


def test_hookscopes_hooks_are_marked_and_gone_after_the_session():
    model = _model()
    mine = model[0].register_forward_hook(user_forward_hook)
    try:
        plan = Plan(capture=("0", "2"), clamp={"0": (-0.5, 0.5)})
        with HookSession(plan.resolve(model)):
            inside = list_hooks(model, include_global=False)
            ours = [h for h in inside if h.is_hookscope]
            assert sorted(h.path for h in ours) == ["0", "2"]
            assert all(h.file.endswith("hooks.py") for h in ours)
            assert leaked_hooks(model)   # while it runs they are there...
            model(torch.ones(1, 3))
        after = list_hooks(model, include_global=False)
        assert [(h.path, h.name, h.owner) for h in after] == [("0", "user_forward_hook", "user")]
        assert leaked_hooks(model) == []  # ... and gone once it ended; the user's stays
    finally:
        mine.remove()


def test_global_hooks_are_listed_once_under_every_module():
    model = _model()
    handle = torch.nn.modules.module.register_module_forward_hook(user_forward_hook)
    try:
        glob = [h for h in list_hooks(model) if h.path == GLOBAL_PATH]
        assert [(h.kind, h.name, h.owner) for h in glob] == [
            ("global forward hook", "user_forward_hook", "user")]
    finally:
        handle.remove()
    assert not [h for h in list_hooks(model) if h.path == GLOBAL_PATH]

