"""core/fast/guard_pauses.py: the in-place guard steps aside inside read-only layers only,
and the dispatch stack is as it was after every path."""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode

from hookscope.core import ForwardError, Plan, run
from hookscope.core.fast.guard_pauses import GuardPauses
from hookscope.core.fast.inplace_guard import InplaceGuard

from fast_marks import fast_only  # tests/core is on sys.path

pytestmark = fast_only


class Seeing(InplaceGuard):
    """The guard, listing the ops it was shown."""

    def __init__(self):
        super().__init__()
        self.seen: list[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.seen.append(func.overloadpacket.__name__)
        return super().__torch_dispatch__(func, types, args, kwargs)


def block():
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU(inplace=True),
                         nn.MaxPool2d(2)).eval()


def test_read_only_layers_run_outside_the_guard_and_in_place_ones_inside():
    m, g = block(), Seeing()
    with torch.no_grad(), g, GuardPauses(m, g):
        m(torch.randn(1, 3, 10, 10))
    assert "relu_" in g.seen
    assert not {"convolution", "native_batch_norm", "max_pool2d_with_indices"} & set(g.seen)
    assert torch._C._len_torch_dispatch_stack() == 0
    assert all(not mod._forward_hooks and not mod._forward_pre_hooks for mod in m.modules())


def test_a_layer_that_raises_leaves_the_stack_as_it_was():
    m, g = nn.Sequential(nn.Linear(3, 3)), Seeing()
    with torch.no_grad(), g:
        with pytest.raises(RuntimeError):
            with GuardPauses(m, g):
                m(torch.randn(2, 5))  # wrong width: raises inside the paused Linear
        assert torch._C._len_torch_dispatch_stack() == 1  # the guard is back on
    assert torch._C._len_torch_dispatch_stack() == 0
    assert not m[0]._forward_hooks and not m[0]._forward_pre_hooks


class Counting(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.ops = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops += 1
        return func(*args, **(kwargs or {}))


class OwnMode(nn.Module):
    """Runs its Linear under a dispatch mode of its own."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 3)
        self.mode = Counting()

    def forward(self, x):
        with self.mode:
            return self.lin(x)


def test_a_mode_the_model_pushes_is_left_alone():
    m, g = OwnMode(), Seeing()
    with torch.no_grad(), g, GuardPauses(m, g):
        m(torch.randn(2, 3))
    assert m.mode.ops > 0  # the Linear's ops reached the model's own mode
    assert torch._C._len_torch_dispatch_stack() == 0


def test_a_model_error_under_the_guard_is_still_a_forward_error(monkeypatch):
    import hookscope.core.fast.inplace_guard as iv

    monkeypatch.setattr(iv, "GUARD_FROM_PARAMS", 0)
    m = nn.Sequential(nn.Linear(3, 3), nn.ReLU(inplace=True))
    with pytest.raises(ForwardError, match="shape"):
        run(m, torch.randn(2, 5), Plan(capture=["0", "1"]))
    assert torch._C._len_torch_dispatch_stack() == 0
    assert all(not mod._forward_hooks and not mod._forward_pre_hooks for mod in m.modules())
