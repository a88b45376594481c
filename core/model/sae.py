"""Sparse autoencoders: read one from a folder in the format SAELens writes, encode
and decode a layer's output with it, and attach it to a layer.

A folder holds ``cfg.json`` (``d_in``, ``d_sae``, ``architecture``:
``standard``, ``jumprelu`` or ``topk`` with ``k``; ``apply_b_dec_to_input``;
``normalize_activations`` must be none) and ``sae_weights.safetensors``
(``W_enc`` ``(d_in, d_sae)``, ``b_enc`` ``(d_sae,)``, ``W_dec`` ``(d_sae, d_in)``,
``b_dec`` ``(d_in,)``, and ``threshold`` ``(d_sae,)`` for JumpReLU).

Reading is as careful as every other file Hookscope opens: both files must be
regular files (a FIFO or a device is refused without blocking), ``cfg.json``
is bounded, the sizes it declares are checked against the input memory budget
before anything is allocated, the safetensors header is checked tensor by
tensor against those sizes before the data is read, and nothing is ever
unpickled (a folder with only ``.pt``/``.pkl`` weights is refused). Pure torch.
"""

from __future__ import annotations

import json
import struct
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from .budget import check_input_size
from ..base.errors import HookscopeError, PlanError
from ..base.regular_file import read_regular
from ..base.user_text import shown

CFG_NAME, WEIGHTS_NAME = "cfg.json", "sae_weights.safetensors"
CFG_LIMIT = 1 << 20          # a cfg.json is a few hundred bytes
HEADER_LIMIT = 1 << 20       # a safetensors header of five tensors is far below this
ARCHITECTURES = ("standard", "jumprelu", "topk")
_DTYPES = {"F32": (torch.float32, 4), "F16": (torch.float16, 2), "BF16": (torch.bfloat16, 2),
           "F64": (torch.float64, 8)}


class SaeError(HookscopeError):
    """An SAE folder that cannot be used, and what to do about it."""


@dataclass(eq=False)
class SparseAutoencoder:
    """Weights and settings of one SAE (float32 on the CPU until :meth:`to`)."""

    W_enc: torch.Tensor
    b_enc: torch.Tensor
    W_dec: torch.Tensor
    b_dec: torch.Tensor
    architecture: str = "standard"
    threshold: torch.Tensor | None = None
    k: int | None = None
    apply_b_dec_to_input: bool = True
    folder: str = ""
    hook_name: str = ""

    @property
    def d_in(self) -> int:
        return int(self.W_enc.shape[0])

    @property
    def d_sae(self) -> int:
        return int(self.W_enc.shape[1])

    def _on(self, t: torch.Tensor) -> dict[str, torch.Tensor]:
        names = ("W_enc", "b_enc", "W_dec", "b_dec") + (("threshold",) if self.threshold is not None else ())
        return {n: getattr(self, n).to(device=t.device, dtype=torch.float32) for n in names}

    def check_width(self, width: int, where: str) -> None:
        if width != self.d_in:
            raise PlanError(f"the SAE in {shown(self.folder) if self.folder else 'memory'} reads {self.d_in} "
                            f"features, but {where}'s output is {width} wide: attach an SAE "
                            "trained on this layer")

    def encode(self, x: torch.Tensor) -> torch.Tensor:
        """Feature activations ``(..., d_sae)`` of ``x`` ``(..., d_in)`` (float32)."""
        w = self._on(x)
        z = x.float()
        if self.apply_b_dec_to_input:
            z = z - w["b_dec"]
        pre = z @ w["W_enc"] + w["b_enc"]
        if self.architecture == "jumprelu":
            return torch.relu(pre) * (pre > w["threshold"])
        acts = torch.relu(pre)
        if self.architecture == "topk" and self.k is not None and self.k < acts.shape[-1]:
            top = acts.topk(self.k, dim=-1)
            acts = torch.zeros_like(acts).scatter(-1, top.indices, top.values)
        return acts

    def decode(self, f: torch.Tensor) -> torch.Tensor:
        w = self._on(f)
        return f @ w["W_dec"] + w["b_dec"]


def _int(cfg: dict, key: str, folder: Path) -> int:
    v = cfg.get(key)
    if not isinstance(v, int) or isinstance(v, bool) or not 0 < v <= 1 << 40:
        raise SaeError(f"{shown(folder / CFG_NAME)}: {key} must be a positive whole number, "
                       f"got {shown(repr(v))}")
    return v


def read_cfg(folder: Path) -> dict[str, Any]:
    data = read_regular(folder / CFG_NAME, CFG_LIMIT, "SAE config", SaeError)
    try:
        cfg = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise SaeError(f"{shown(folder / CFG_NAME)} is not JSON: {exc}") from exc
    if not isinstance(cfg, dict):
        raise SaeError(f"{shown(folder / CFG_NAME)} must hold a JSON object")
    return cfg


def _header(data: bytes, path: Path) -> dict[str, Any]:
    if len(data) < 8:
        raise SaeError(f"{shown(path)} is too short to be a safetensors file")
    (n,) = struct.unpack("<Q", data[:8])
    if n > HEADER_LIMIT or 8 + n > len(data):
        raise SaeError(f"{shown(path)}: its header claims {n:,} bytes; the file is damaged or "
                       "not a safetensors file")
    try:
        header = json.loads(data[8:8 + n].decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise SaeError(f"{shown(path)}: the safetensors header is not JSON ({exc})") from exc
    if not isinstance(header, dict):
        raise SaeError(f"{shown(path)}: the safetensors header is not an object")
    return header


#: ``--sae LAYER=demo``: the SAE shipped for ``demo:lm`` (``resources/train_sae.py``).
DEMO_SAE = "demo"


def sae_folder(text: str | Path) -> Path:
    """The folder ``text`` names; ``demo`` is the SAE shipped for ``demo:lm``'s ``blocks.0``."""
    if str(text) == DEMO_SAE:
        from importlib.resources import files

        return Path(str(files("hookscope.resources").joinpath("demo_sae")))
    return Path(text).expanduser()


def load_sae(folder: str | Path) -> SparseAutoencoder:
    """The SAE saved in ``folder`` (SAELens layout; ``"demo"``: the one shipped for
    ``demo:lm``); :class:`SaeError` says what is wrong."""
    folder = sae_folder(folder)
    if not folder.is_dir():
        raise SaeError(f"SAE folder {shown(folder)} is not a folder: give the folder holding "
                       f"{CFG_NAME} and {WEIGHTS_NAME}")
    weights = folder / WEIGHTS_NAME
    if not weights.exists() and not weights.is_symlink():
        pickled = sorted(p.name for p in folder.iterdir() if p.suffix in (".pt", ".pth", ".pkl", ".bin"))
        hint = (f" ({', '.join(pickled[:3])} is a pickle, which Hookscope never loads: save the "
                "weights with safetensors)") if pickled else ""
        raise SaeError(f"SAE folder {shown(folder)} has no {WEIGHTS_NAME}{hint}")
    cfg = read_cfg(folder)
    d_in, d_sae = _int(cfg, "d_in", folder), _int(cfg, "d_sae", folder)
    arch = cfg.get("architecture", "standard")
    if arch not in ARCHITECTURES:
        raise SaeError(f"{shown(folder / CFG_NAME)}: architecture {shown(repr(arch))} is not one "
                       f"Hookscope reads ({', '.join(ARCHITECTURES)})")
    norm = cfg.get("normalize_activations", "none")
    if norm not in (None, "none"):
        raise SaeError(f"{shown(folder / CFG_NAME)}: normalize_activations {shown(repr(norm))} "
                       "is not supported; use an SAE trained without it")
    k = _int(cfg, "k", folder) if arch == "topk" else None
    shapes = {"W_enc": (d_in, d_sae), "b_enc": (d_sae,), "W_dec": (d_sae, d_in), "b_dec": (d_in,)}
    if arch == "jumprelu":
        shapes["threshold"] = (d_sae,)
    # Declared sizes first: a cfg asking for a terabyte is refused before a byte is read.
    check_input_size(sum(8 * _numel(s) for s in shapes.values()), f"the SAE in {shown(folder)}")
    data = read_regular(weights, 8 + HEADER_LIMIT + sum(8 * _numel(s) for s in shapes.values()),
                        "SAE weights file", SaeError)
    header = _header(data, weights)
    for name, shape in shapes.items():
        entry = header.get(name)
        if not isinstance(entry, dict):
            raise SaeError(f"{shown(weights)} has no tensor {name}; an SAE needs "
                           f"{', '.join(shapes)}")
        if entry.get("dtype") not in _DTYPES or tuple(entry.get("shape", ())) != shape:
            raise SaeError(f"{shown(weights)}: {name} is {entry.get('dtype')} "
                           f"{tuple(entry.get('shape') or ())}, but cfg.json (d_in={d_in}, "
                           f"d_sae={d_sae}) asks for a float tensor of shape {shape}")
    from safetensors import SafetensorError
    from safetensors.torch import load

    try:
        tensors = load(data)
    except (SafetensorError, ValueError, RuntimeError) as exc:
        raise SaeError(f"cannot read {shown(weights)} as safetensors: {exc}") from exc
    t = {n: tensors[n].float() for n in shapes}
    return SparseAutoencoder(t["W_enc"], t["b_enc"], t["W_dec"], t["b_dec"], arch,
                             t.get("threshold"), k, bool(cfg.get("apply_b_dec_to_input", True)),
                             str(folder), str(cfg.get("hook_name", "")))


def _numel(shape: tuple[int, ...]) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


# -- attaching --------------------------------------------------------------------
# The SAE attached to each layer module; weak, so a closed model forgets its SAEs.
_ATTACHED: "weakref.WeakKeyDictionary[nn.Module, SparseAutoencoder]" = weakref.WeakKeyDictionary()


def attach_sae(root: nn.Module, path: str, sae: SparseAutoencoder | str | Path,
               width: int | None = None) -> SparseAutoencoder:
    """Attach ``sae`` (or the folder holding one) to layer ``path`` of ``root``: the
    ``sae-*`` interventions on that layer and its feature view use it. ``width``:
    the layer's output width where known (refused when it differs)."""
    try:
        module = root.get_submodule(path)
    except AttributeError as exc:
        raise PlanError(f"no layer {shown(path)} to attach an SAE to") from exc
    if not isinstance(sae, SparseAutoencoder):
        sae = load_sae(sae)
    if width is not None:
        sae.check_width(width, path)
    _ATTACHED[module] = sae
    return sae


def detach_sae(root: nn.Module, path: str) -> None:
    _ATTACHED.pop(root.get_submodule(path), None)


def attached_sae(module: nn.Module | None) -> SparseAutoencoder | None:
    return _ATTACHED.get(module) if module is not None else None
