"""Models a notebook would build, for the live-model tests: one class importable by name and
built with no arguments (a session file can name it), one that needs an argument."""

from __future__ import annotations

import torch
from torch import nn


class TinyNet(nn.Module):
    """Linear(3, 4) -> ReLU -> Linear(4, 2), seeded."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(42)
        self.fc1 = nn.Linear(3, 4)
        self.act = nn.ReLU()
        self.fc2 = nn.Linear(4, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(self.act(self.fc1(x)))


class WidthNet(nn.Module):
    """Needs its width: a session file cannot rebuild it by name alone."""

    def __init__(self, width: int) -> None:
        super().__init__()
        self.fc = nn.Linear(3, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(x)


def all_hooks(model: nn.Module) -> dict[str, list]:
    """Every hook on every module of ``model``, by module path (forward, pre, backward)."""
    out = {}
    for name, m in model.named_modules():
        hooks = [*m._forward_hooks.values(), *m._forward_pre_hooks.values(),
                 *m._backward_hooks.values()]
        if hooks:
            out[name] = hooks
    return out
