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


class _Wrapped(nn.Module):
    """A Linear whose forward's result goes through ``shape`` (a nested output, a fault)."""

    def __init__(self, shape):
        super().__init__()
        self.inner = nn.Linear(3, 3)
        self.shape = shape

    def forward(self, x):
        return self.shape(self.inner(x))


def _made(module, example):
    MADE.append(module)
    return module, example


def dict_example():
    """A model whose example input is a dict of keywords (``random:`` makes every key)."""
    class Keywords(nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = nn.Linear(3, 3)

        def forward(self, x):
            return self.inner(x)

    return _made(Keywords(), {"x": torch.ones(1, 3)})


def _raise_generator_exit():
    raise GeneratorExit("the model's generator closed")


class Unprintable(Exception):
    """An exception that fails even at being turned into text."""

    def __str__(self):
        raise RuntimeError("no message for you")


def _raise_unprintable():
    raise Unprintable()


def raises_generator_exit():
    return _make(_raise_generator_exit)


def raises_unprintable():
    return _make(_raise_unprintable)


def _deep(y, depth=5000):
    for _ in range(depth):
        y = (y,)
    return y


def _self_referential(y):
    d = {"y": y}
    d["self"] = d
    return d


def deep_output():
    """A forward returning its tensor inside 5000 nested tuples."""
    return _made(_Wrapped(_deep), torch.ones(1, 3))


def self_referential_output():
    """A forward returning a dict that holds itself."""
    return _made(_Wrapped(_self_referential), torch.ones(1, 3))
