"""Two small models whose module trees differ, for the model diff's tests: model A has a
``norm`` layer B lacks; model B has six ``extras`` layers A lacks and calls ``act`` twice
(A once). Their shared layers have the same weights. A factory file too:
``differing_trees.py:build_a`` and ``:build_b`` (each with an example input)."""

from __future__ import annotations

import torch
from torch import nn


class Net(nn.Module):
    def __init__(self, norm: bool = False, extras: int = 0, twice: bool = False) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.fc1, self.act, self.fc2 = nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 2)
        self.norm = nn.LayerNorm(4) if norm else None
        self.extras = nn.ModuleList(nn.Identity() for _ in range(extras))
        self.twice = twice

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.act(self.fc1(x))
        if self.norm is not None:
            h = self.norm(h)
        for layer in self.extras:
            h = layer(h)
        if self.twice:
            h = self.act(h)
        return self.fc2(h)


def example() -> torch.Tensor:
    return torch.linspace(-1.0, 1.0, 12).reshape(3, 4)


def build_a() -> tuple[nn.Module, torch.Tensor]:
    return Net(norm=True).eval(), example()


def build_b() -> tuple[nn.Module, torch.Tensor]:
    return Net(extras=6, twice=True).eval(), example()
