"""Models whose forward misbehaves, for the catalogue (imported as ``faulty_models:NAME``).

Each factory records the module it made in :data:`MADE`, so a test can check
that every hook Hookscope added is gone after the run failed.
"""

from __future__ import annotations

import sys

import torch
from torch import nn

MADE: list[nn.Module] = []


class Abort(BaseException):
    """A custom BaseException, as some frameworks raise to unwind."""


class Faulty(nn.Module):
    def __init__(self, fault):
        super().__init__()
        self.inner = nn.Linear(3, 3)
        self.fault = fault

    def forward(self, x):
        y = self.inner(x)
        if self.fault is not None:
            self.fault()
        return y


def _abort():
    raise Abort("model gave up")


def _interrupt():
    raise KeyboardInterrupt


def _exit():
    sys.exit(3)


def _oom():
    raise MemoryError("out of memory in forward")


def _make(fault):
    m = nn.Sequential(Faulty(fault), nn.ReLU())
    MADE.append(m)
    return m, torch.ones(1, 3)


def raises_base_exception():
    return _make(_abort)


def raises_keyboard_interrupt():
    return _make(_interrupt)


def calls_sys_exit():
    return _make(_exit)


def raises_memory_error():
    return _make(_oom)


def non_finite():
    """A layer whose output holds NaN and Inf beside a finite 3."""
    class Leaky(nn.Module):
        def forward(self, x):
            return x * torch.tensor([float("nan"), float("inf"), 3.0])

    m = nn.Sequential(Leaky(), nn.Identity())
    MADE.append(m)
    return m, torch.ones(1, 3)


def hooks_left(module: nn.Module) -> int:
    """Forward (pre-)hooks still attached anywhere in ``module``."""
    return sum(len(m._forward_hooks) + len(m._forward_pre_hooks) for m in module.modules())
