"""Small models whose layers return nested outputs, and hand-written hooks that read them.

Shared by the core, CLI and window tests of per-leaf captures. Each model has
one layer (``inner``) that returns several tensors; ``LEAVES[...]`` names
them the way a person reads them, and ``leaf_values`` picks them out of the
output by hand (no Hookscope code), so the tests compare Hookscope's per-leaf
records against values a plain forward hook saw.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn


class LSTMNet(nn.Module):
    """``inner`` is an LSTM: ``(out, (h, c))``; all three reach the output."""

    def __init__(self) -> None:
        super().__init__()
        self.inner = nn.LSTM(3, 4, batch_first=True)
        self.head = nn.Linear(4, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out, (h, c) = self.inner(x)
        return self.head(out[:, -1]) + h[-1].sum(-1, keepdim=True) - c[-1].mean(-1, keepdim=True)


class DictLayer(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(3, 5)

    def forward(self, x: torch.Tensor) -> dict:
        y = self.lin(x)
        return {"hidden": y, "pair": (torch.tanh(y), y > 0), "tag": "not a tensor"}


class DictNet(nn.Module):
    """``inner`` returns a dict with a nested tuple, a bool leaf (no kind changes it) and a string."""

    def __init__(self) -> None:
        super().__init__()
        self.pre = nn.Linear(3, 3)
        self.inner = DictLayer()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        o = self.inner(self.pre(x))
        return o["hidden"] * o["pair"][1] + o["pair"][0]


@dataclass
class Out:
    """Like a Hugging Face ``ModelOutput`` that is a plain dataclass."""

    last_hidden_state: torch.Tensor
    pooled: torch.Tensor
    note: str = ""


class DataclassLayer(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(3, 6)

    def forward(self, x: torch.Tensor) -> Out:
        h = self.lin(x)
        return Out(h, h.mean(1), note="pooled by mean")


class DataclassNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.inner = DataclassLayer()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        o = self.inner(x)
        return o.last_hidden_state.sum(1) + o.pooled.sum()


LEAVES = {
    LSTMNet: {"[0]": lambda o: o[0], "[1][0]": lambda o: o[1][0], "[1][1]": lambda o: o[1][1]},
    DictNet: {"['hidden']": lambda o: o["hidden"], "['pair'][0]": lambda o: o["pair"][0],
              "['pair'][1]": lambda o: o["pair"][1]},
    DataclassNet: {".last_hidden_state": lambda o: o.last_hidden_state,
                   ".pooled": lambda o: o.pooled},
}


def make(kind: type, seed: int = 0) -> tuple[nn.Module, torch.Tensor]:
    torch.manual_seed(seed)
    model = kind().eval()
    shape = (2, 5, 3) if kind is LSTMNet else (4, 3)
    return model, torch.randn(*shape) * 2


def leaf_values(model: nn.Module, output) -> dict[str, torch.Tensor]:
    """``{leaf name: tensor}`` of ``inner``'s output, picked by hand."""
    return {name: pick(output).detach().clone() for name, pick in LEAVES[type(model)].items()}


def hand_hooked(module: nn.Module, x: torch.Tensor, change=None):
    """A plain forward hook on ``module``: its output before ``change`` (and after), and
    the model's output. ``change`` maps each float tensor leaf (as a clamp does)."""
    seen: dict[str, object] = {}

    def hook(_m, _a, out):
        seen["pre"] = out
        if change is None:
            return None
        new = _mapped(out, change)
        seen["post"] = new
        return new

    return hook, seen


def _mapped(value, change):
    if isinstance(value, torch.Tensor):
        return change(value) if value.is_floating_point() else value
    if isinstance(value, tuple):
        return tuple(_mapped(v, change) for v in value)
    if isinstance(value, dict):
        return {k: _mapped(v, change) for k, v in value.items()}
    if isinstance(value, Out):
        return Out(_mapped(value.last_hidden_state, change), _mapped(value.pooled, change), value.note)
    return value


def run_hand(model: nn.Module, path: str, x: torch.Tensor, change=None):
    """``(output, leaves before the change, leaves after it)`` from a plain hook on ``path``."""
    hook, seen = hand_hooked(model.get_submodule(path), x, change)
    handle = model.get_submodule(path).register_forward_hook(hook)
    try:
        with torch.no_grad():
            y = model(x)
    finally:
        handle.remove()
    pre = leaf_values(model, seen["pre"]) if type(model) in LEAVES else None
    post = leaf_values(model, seen["post"]) if "post" in seen and type(model) in LEAVES else pre
    return y, pre, post, seen


PATH = __file__  # a factory file: SPEC = f"{PATH}:lstm"


def lstm() -> tuple[nn.Module, torch.Tensor]:
    return make(LSTMNet)


def dict_net() -> tuple[nn.Module, torch.Tensor]:
    return make(DictNet)
