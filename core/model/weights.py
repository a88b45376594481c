"""Weights for a factory's module: a ``state_dict`` in ``.pt``/``.pth`` or ``.safetensors``.

``.pt`` files are always read with ``weights_only=True``: tensors and plain
containers only, never code. A mismatch names the missing and unexpected keys
and the shapes that disagree, which is what a person needs to fix it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Mapping

import torch
from torch import nn
from safetensors import SafetensorError
from safetensors.torch import load_file

from ..base.errors import SpecError
from ..base.regular_file import check_regular
from ..base.torch_load import load_tensors
from ..base.user_text import user_path

_WRAPPER_KEYS = ("state_dict", "model_state_dict", "model", "weights")


def read_state_dict(path: str | Path) -> dict[str, torch.Tensor]:
    path = user_path(path)
    check_regular(path, "weights file", SpecError)  # never a FIFO or a device
    if path.suffix == ".safetensors":
        try:
            return load_file(str(path))
        except (SafetensorError, OSError, ValueError) as exc:
            raise SpecError(f"cannot read {path} as safetensors: {exc}") from exc
    if path.suffix not in (".pt", ".pth", ".bin"):
        raise SpecError(f"weights file {path.name!r}: use a .pt, .pth or .safetensors state_dict")
    try:
        state = load_tensors(path)
    except Exception as exc:  # unpickling errors come in several types
        raise SpecError(f"cannot load {path} with weights_only=True (only tensors and plain "
                        f"containers are read): {str(exc).splitlines()[0]}") from exc
    if isinstance(state, Mapping) and not all(isinstance(v, torch.Tensor) for v in state.values()):
        for key in _WRAPPER_KEYS:  # checkpoints often wrap the state_dict
            if isinstance(state.get(key), Mapping):
                state = state[key]
                break
    if not isinstance(state, Mapping) or not all(isinstance(v, torch.Tensor) for v in state.values()):
        raise SpecError(f"{path} is not a state_dict (a mapping of names to tensors); save it "
                        "with torch.save(model.state_dict(), path)")
    return dict(state)


def apply_weights(module: nn.Module, path: str | Path) -> None:
    """Load the state_dict at ``path`` into ``module`` strictly, explaining any mismatch."""
    state = read_state_dict(path)
    own = module.state_dict()
    missing = sorted(set(own) - set(state))
    unexpected = sorted(set(state) - set(own))
    wrong = sorted(k for k in set(own) & set(state) if own[k].shape != state[k].shape)
    if missing or unexpected or wrong:
        parts = []
        if missing:
            parts.append(f"missing keys {_few(missing)}")
        if unexpected:
            parts.append(f"unexpected keys {_few(unexpected)}")
        if wrong:
            parts.append("shape mismatch " + ", ".join(
                f"{k}: file {tuple(state[k].shape)} vs model {tuple(own[k].shape)}" for k in wrong[:5]))
        raise SpecError(f"weights {Path(path).name} do not fit the model: " + "; ".join(parts)
                        + ". Check that the file was saved from this architecture.")
    module.load_state_dict(state, strict=True)


def _few(keys: list[str], n: int = 8) -> str:
    shown = ", ".join(keys[:n])
    return f"[{shown}{', ...' if len(keys) > n else ''}] ({len(keys)})"
