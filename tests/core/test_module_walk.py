"""module_walk: torch's ``named_modules(remove_duplicate=False)``, walked once per run."""

from collections import OrderedDict

import torch
from torch import nn

from hookscope.core.engine.forward_state import snapshot
from hookscope.core.model.module_walk import module_walk, unique_modules
from hookscope.core.plan.plan import Plan
from hookscope.core.engine.run import run


def _pairs(walk):
    return [(p, id(m)) for p, m in walk]


def test_walk_is_named_modules_with_duplicates_in_order():
    shared = nn.Linear(4, 4)
    inner = nn.Sequential(OrderedDict(a=shared, act=nn.ReLU(), b=shared))
    model = nn.Sequential(OrderedDict(stem=nn.Conv2d(1, 1, 1), body=inner, again=inner,
                                      norm=nn.BatchNorm1d(4)))
    model.add_module("gone", None)  # a None child is skipped, as torch skips it
    want = list(model.named_modules(remove_duplicate=False))
    assert _pairs(module_walk(model)) == _pairs(want)
    assert "again.b" in dict(module_walk(model))  # a shared module's second subtree too
    assert [id(m) for m in unique_modules(module_walk(model))] == [id(m) for m in model.modules()]


def test_a_class_with_its_own_named_modules_is_asked():
    class Wrapper(nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = nn.Linear(2, 2)

        def named_modules(self, *args, **kwargs):  # e.g. a wrapper hiding its own prefix
            for p, m in super().named_modules(*args, **kwargs):
                yield p.replace("inner", "core"), m

    model = nn.Sequential(Wrapper())
    assert [p for p, _ in module_walk(model)] == ["", "0", "0.core"]


def test_a_module_holding_its_parent_does_not_walk_forever():
    class Child(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(3, 3)

        def forward(self, x):
            return self.fc(x)

    child = Child()
    model = nn.Sequential(OrderedDict(child=child))
    child.owner = model  # registered as a submodule: a cycle
    assert [p for p, _ in module_walk(model)] == ["", "child", "child.fc"]
    x = torch.randn(2, 3)
    r = run(model, x, Plan(capture=["child.fc"]))
    with torch.no_grad():
        assert torch.equal(r.captures["child.fc"][0].tensor, child.fc(x))


def test_snapshot_from_the_walk_records_what_the_module_walk_would():
    model = nn.Sequential(nn.Linear(3, 3), nn.BatchNorm1d(3), nn.BatchNorm1d(3).eval())
    model.register_buffer("steps", torch.zeros(()))
    a, b = snapshot(model), snapshot(model, unique_modules(module_walk(model)))
    assert [(id(o), n) for o, n, _, _ in a.buffers] == [(id(o), n) for o, n, _, _ in b.buffers]
    assert len(b.buffers) == 4  # the training BatchNorm's three and the step counter
