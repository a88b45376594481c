"""A model factory for app tests: its forward blocks until the test opens a gate.

This makes "a run is in flight" a state the test controls, without sleeps:
``model.release.clear()`` closes the gate, ``model.entered`` says a forward
is waiting at it, ``model.release.set()`` lets it finish. Load it with the
spec ``f"{PATH}:make"``.
"""

import threading
from pathlib import Path

import torch
from torch import nn

PATH = Path(__file__).resolve()
SPEC = f"{PATH}:make"


class _TwoLinears(nn.Module):
    """Linear(3, 4) then Linear(4, 2), seeded, with a ``release`` gate that starts open."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.lin = nn.Linear(3, 4)
        self.out = nn.Linear(4, 2)
        self.release = threading.Event()
        self.release.set()

    def _pass_gate(self, arrived: threading.Event) -> None:
        arrived.set()
        if not self.release.wait(60):
            raise RuntimeError("test gate never opened")


class Gated(_TwoLinears):
    def __init__(self) -> None:
        super().__init__()
        self.entered = threading.Event()

    def forward(self, x):
        self._pass_gate(self.entered)
        return self.out(self.lin(x))


def make():
    return Gated(), torch.tensor([[1.0, 2.0, 3.0]])


def make_closed():
    """The gate starts closed: the first forward of the model (the observe pass the
    window runs right after loading it) waits until the test opens it."""
    model, x = make()
    model.release.clear()
    return model, x


class GatedAtSecondLayer(_TwoLinears):
    """Its second layer waits at a gate, so a run can be held half done: ``release``
    and ``at_gate`` as :class:`Gated`'s ``release`` and ``entered``."""

    def __init__(self) -> None:
        super().__init__()
        self.at_gate = threading.Event()
        # registered first: it runs before a runner's stop point on ``out``
        self.out.register_forward_pre_hook(self._gate)

    def _gate(self, _m, _args) -> None:
        self._pass_gate(self.at_gate)

    def forward(self, x):
        return self.out(self.lin(x))


def make_half():
    return GatedAtSecondLayer(), torch.tensor([[1.0, 2.0, 3.0]])
