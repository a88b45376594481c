"""Model factories for the device-map tests: big enough to split, small enough to be quick.

``mlp_stack`` is a plain-torch stack of blocks (Linear + an in-place ReLU, so
captures meet accelerate's hooks *and* an in-place op); load it with the spec
``f"{PATH}:mlp_stack"``.
"""

from pathlib import Path

import torch
from torch import nn

PATH = Path(__file__).resolve()
WIDTH = 32
BLOCKS = 6


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(WIDTH, WIDTH)
        self.act = nn.ReLU(inplace=True)

    def forward(self, x):
        return self.act(self.lin(x))


def mlp_stack():
    torch.manual_seed(7)
    model = nn.Sequential(*[Block() for _ in range(BLOCKS)], nn.Linear(WIDTH, 3))
    return model, torch.randn(4, WIDTH, generator=torch.Generator().manual_seed(1))
