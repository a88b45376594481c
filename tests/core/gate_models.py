"""A model a test can hold half way through its forward (importable, and a factory file)."""

from __future__ import annotations

import threading

import torch
from torch import nn


class GatedAtSecondLayer(nn.Module):
    """Its second layer waits at a gate, so a run can be held half done."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.lin = nn.Linear(3, 4)
        self.out = nn.Linear(4, 2)
        self.release = threading.Event()
        self.release.set()
        self.at_gate = threading.Event()
        # registered first: it runs before the runner's stop point on ``out``
        self.out.register_forward_pre_hook(self._gate)

    def _gate(self, _m, _args) -> None:
        self.at_gate.set()
        assert self.release.wait(30), "test gate never opened"

    def forward(self, x):
        return self.out(self.lin(x))


def make():
    return GatedAtSecondLayer(), torch.tensor([[1.0, 2.0, 3.0]])
