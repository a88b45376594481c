"""Sparse autoencoders: read one from a folder in the format SAELens writes, encode
and decode a layer's output with it, and attach it to a layer.

A folder holds ``cfg.json`` (``d_in``, ``d_sae``, ``architecture``:
``standard``, ``jumprelu`` or ``topk`` with ``k``) and ``sae_weights.safetensors``
(``W_enc`` ``(d_in, d_sae)``, ``b_enc`` ``(d_sae,)``, ``W_dec`` ``(d_sae, d_in)``,
``b_dec`` ``(d_in,)``, and ``threshold`` ``(d_sae,)`` for JumpReLU).

Every ``cfg.json`` field that changes SAELens's arithmetic is read as SAELens reads
it, or the folder is refused naming the field: ``apply_b_dec_to_input`` (subtract
``b_dec`` before encoding), ``rescale_acts_by_decoder_norm`` (TopK: pre-activations
times each feature's decoder norm before the top k, activations divided by it before
decoding), ``normalize_activations`` (``none``; ``constant_norm_rescale`` and
``layer_norm`` normalise each input and undo it on the way out;
``expected_average_only_in`` and ``covariance_whitening`` need statistics the folder
does not hold: refused), ``reshape_activations`` (``hook_z``: refused), a pre-6.0
config's ``activation_fn``/``activation_fn_str`` (``topk`` with
``activation_fn_kwargs.k`` is a TopK SAE; another than ``relu``: refused) and
``finetuning_scaling_factor`` (refused), and a ``scaling_factor`` tensor other than
ones (refused).

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
from importlib.resources import files
from pathlib import Path
from typing import Any

import torch
from torch import nn
from safetensors import SafetensorError
from safetensors.torch import load

from .budget import check_input_size
from ..base.errors import HookscopeError, PlanError
from ..base.regular_file import read_regular
from ..base.user_text import shown

CFG_NAME, WEIGHTS_NAME = "cfg.json", "sae_weights.safetensors"
CFG_LIMIT = 1 << 20          # a cfg.json is a few hundred bytes
HEADER_LIMIT = 1 << 20       # a safetensors header of five tensors is far below this
ARCHITECTURES = ("standard", "jumprelu", "topk")
#: ``normalize_activations`` values computed from each input alone (SAELens's run-time norms)
NORMALISATIONS = ("none", "constant_norm_rescale", "layer_norm")
LAYER_NORM_EPS = 1e-5  # SAELens's run_time_activation_ln_in
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
    rescale_acts_by_decoder_norm: bool = False
    normalize_activations: str = "none"

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

    def _norm_in(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``x`` as the SAE reads it, and the scale and shift that give it back
        (``x == read * scale + shift``): SAELens's run-time activation norms."""
        one = torch.ones((), dtype=x.dtype, device=x.device)
        if self.normalize_activations == "constant_norm_rescale":
            coeff = self.d_in ** 0.5 / x.norm(dim=-1, keepdim=True)
            return x * coeff, 1 / coeff, 0 * one
        if self.normalize_activations == "layer_norm":
            mu = x.mean(dim=-1, keepdim=True)
            std = (x - mu).std(dim=-1, keepdim=True)
            return (x - mu) / (std + LAYER_NORM_EPS), std, mu
        return x, one, 0 * one

    def _decoder_rows(self, f: torch.Tensor, w: dict[str, torch.Tensor]) -> torch.Tensor:
        """``f @ W_dec`` (activations divided by each decoder row's norm first when the
        SAE was trained with ``rescale_acts_by_decoder_norm``)."""
        if self.rescale_acts_by_decoder_norm:
            f = f * (1 / w["W_dec"].norm(dim=-1))
        return f @ w["W_dec"]

    def encode(self, x: torch.Tensor) -> torch.Tensor:
        """Feature activations ``(..., d_sae)`` of ``x`` ``(..., d_in)`` (float32)."""
        w = self._on(x)
        z = self._norm_in(x.float())[0]
        if self.apply_b_dec_to_input:
            z = z - w["b_dec"]
        pre = z @ w["W_enc"] + w["b_enc"]
        if self.architecture == "jumprelu":
            return torch.relu(pre) * (pre > w["threshold"])
        if self.rescale_acts_by_decoder_norm:
            pre = pre * w["W_dec"].norm(dim=-1)
        acts = torch.relu(pre)
        if self.architecture == "topk" and self.k is not None and self.k < acts.shape[-1]:
            top = acts.topk(self.k, dim=-1)
            acts = torch.zeros_like(acts).scatter(-1, top.indices, top.values)
        return acts

    def decode(self, f: torch.Tensor, x: torch.Tensor | None = None) -> torch.Tensor:
        """The reconstruction of features ``f``; ``x``: the input they were encoded from,
        needed when the SAE normalises each input (its norm is undone on the way out)."""
        w = self._on(f)
        out = self._decoder_rows(f, w) + w["b_dec"]
        if self.normalize_activations == "none":
            return out
        if x is None:
            raise PlanError(f"the SAE in {shown(self.folder)} normalises each input "
                            f"({self.normalize_activations}): decode needs that input")
        _, scale, shift = self._norm_in(x.float())
        return out * scale + shift

    def decode_change(self, before: torch.Tensor, after: torch.Tensor,
                      x: torch.Tensor) -> torch.Tensor:
        """How the reconstruction of input ``x`` moves when its features go from
        ``before`` to ``after``: ``decode(after, x) - decode(before, x)``, computed
        as one product (the error term of ``x`` is kept by adding it to ``x``)."""
        w = self._on(x)
        scale = self._norm_in(x.float())[1]
        return self._decoder_rows(after - before, w) * scale


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
    arch = _old_topk(cfg) or cfg.get("architecture", "standard")
    if arch not in ARCHITECTURES:
        raise SaeError(f"{shown(folder / CFG_NAME)}: architecture {shown(repr(arch))} is not one "
                       f"Hookscope reads ({', '.join(ARCHITECTURES)})")
    arch, k, settings = _arithmetic(cfg, arch, folder)
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
    try:
        tensors = load(data)
    except (SafetensorError, ValueError, RuntimeError) as exc:
        raise SaeError(f"cannot read {shown(weights)} as safetensors: {exc}") from exc
    if "scaling_factor" in tensors and not torch.all(tensors["scaling_factor"] == 1):
        raise SaeError(f"{shown(weights)} holds a scaling_factor other than ones (a pre-6.0 "
                       "SAELens fine-tuning scale), which Hookscope does not apply: fold it "
                       "into W_dec and save the SAE again")
    t = {n: tensors[n].float() for n in shapes}
    return SparseAutoencoder(t["W_enc"], t["b_enc"], t["W_dec"], t["b_dec"], arch,
                             t.get("threshold"), k, folder=str(folder),
                             hook_name=str(cfg.get("hook_name", "")), **settings)


def _old_topk(cfg: dict) -> str | None:
    """``"topk"`` for a pre-6.0 SAELens config that says TopK by its activation function."""
    fn = cfg.get("activation_fn", cfg.get("activation_fn_str"))
    kwargs = cfg.get("activation_fn_kwargs")
    if fn == "topk" and isinstance(kwargs, dict) and kwargs.get("k") is not None:
        return "topk"
    return None


def _before_6(cfg: dict) -> bool:
    """Whether ``cfg`` was written by SAELens before 6.0 (or says no version)."""
    meta = cfg.get("metadata")
    version = cfg.get("sae_lens_version") or (meta.get("sae_lens_version")
                                              if isinstance(meta, dict) else None)
    try:
        return int(str(version).split(".")[0]) < 6
    except ValueError:
        return True


def _flag(cfg: dict, key: str, default: bool, folder: Path) -> bool:
    v = cfg.get(key, default)
    if not isinstance(v, bool):
        raise SaeError(f"{shown(folder / CFG_NAME)}: {key} must be true or false, got "
                       f"{shown(repr(v))}")
    return v


def _arithmetic(cfg: dict, arch: str, folder: Path) -> tuple[str, int | None, dict[str, Any]]:
    """The architecture, ``k`` and the settings of every ``cfg.json`` field that changes
    what encode and decode compute; :class:`SaeError` naming a field Hookscope cannot
    compute as SAELens does."""
    where = shown(folder / CFG_NAME)
    k: int | None = None
    if arch == "topk":
        kwargs = cfg.get("activation_fn_kwargs")
        old_k = kwargs.get("k") if isinstance(kwargs, dict) and "k" not in cfg else None
        k = _int({"k": old_k} if old_k is not None else cfg, "k", folder)
    fn = cfg.get("activation_fn", cfg.get("activation_fn_str"))
    if fn not in (None, "relu") and not (fn == "topk" and arch == "topk"):
        raise SaeError(f"{where}: activation_fn {shown(repr(fn))} is not one Hookscope computes "
                       "(relu, or topk with activation_fn_kwargs.k)")
    if _flag(cfg, "finetuning_scaling_factor", False, folder):
        raise SaeError(f"{where}: finetuning_scaling_factor is true (a pre-6.0 SAELens scale on "
                       "the features), which Hookscope does not apply: fold it into W_dec")
    norm = cfg.get("normalize_activations", "none")
    norm = "none" if norm in (None, False) else norm
    if norm not in NORMALISATIONS:
        raise SaeError(f"{where}: normalize_activations {shown(repr(norm))} needs statistics "
                       "the folder does not hold; fold them into the weights (SAELens's "
                       "fold_activation_norm_scaling_factor or fold_activation_whitening) and "
                       f"save again, or use one of {', '.join(NORMALISATIONS)}")
    reshape = cfg.get("reshape_activations")
    hook = str(cfg.get("hook_name", cfg.get("hook_point", "")))
    if reshape is None and "hook_z" in hook and _before_6(cfg):
        reshape = "hook_z"  # SAELens reads a pre-6.0 hook_z SAE's heads flattened
    if reshape not in (None, "none"):
        raise SaeError(f"{where}: reshape_activations {shown(repr(reshape))} (heads flattened "
                       "into one axis) is not supported; attach an SAE that reads the layer's "
                       "output as it is")
    rescale = _flag(cfg, "rescale_acts_by_decoder_norm", False, folder)
    if rescale and arch != "topk":
        raise SaeError(f"{where}: rescale_acts_by_decoder_norm is true for a {arch} SAE; "
                       "SAELens applies it to topk SAEs only")
    return arch, k, {"apply_b_dec_to_input": _flag(cfg, "apply_b_dec_to_input", True, folder),
                     "rescale_acts_by_decoder_norm": rescale, "normalize_activations": norm}


def _numel(shape: tuple[int, ...]) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


# -- attaching --------------------------------------------------------------------
# The SAE attached to each layer module; weak, so a closed model forgets its SAEs.
_ATTACHED: "weakref.WeakKeyDictionary[nn.Module, SparseAutoencoder]" = weakref.WeakKeyDictionary()


class StandIn(nn.Module):
    """A module standing for a model held elsewhere (a Ray actor's): it has no layers here,
    so the SAEs attached to its layers are kept on it by layer path (``saes``) and travel
    with each run to be attached where the model is."""

    def __init__(self) -> None:
        super().__init__()
        self.saes: dict[str, SparseAutoencoder] = {}


def attach_sae(root: nn.Module, path: str, sae: SparseAutoencoder | str | Path,
               width: int | None = None) -> SparseAutoencoder:
    """Attach ``sae`` (or the folder holding one) to layer ``path`` of ``root``: the
    ``sae-*`` interventions on that layer and its feature view use it. ``width``:
    the layer's output width where known (refused when it differs)."""
    module = None
    stand_in = root if isinstance(root, StandIn) else None
    if stand_in is None:
        try:
            module = root.get_submodule(path)
        except AttributeError as exc:
            raise PlanError(f"no layer {shown(path)} to attach an SAE to") from exc
    if not isinstance(sae, SparseAutoencoder):
        sae = load_sae(sae)
    if width is not None:
        sae.check_width(width, path)
    if stand_in is not None:  # the layer is where the model is: checked there, at the run
        stand_in.saes[path] = sae
    elif module is not None:
        _ATTACHED[module] = sae
    return sae


def saes_of(root: nn.Module, layers: Any) -> dict[str, SparseAutoencoder]:
    """The SAE attached to each of ``layers`` of ``root`` (a stand-in's as it keeps them)."""
    if isinstance(root, StandIn):
        return {layer: root.saes[layer] for layer in layers if layer in root.saes}
    found = {layer: attached_sae(root.get_submodule(layer)) for layer in layers}
    return {layer: sae for layer, sae in found.items() if sae is not None}


def detach_sae(root: nn.Module, path: str) -> None:
    if isinstance(root, StandIn):
        root.saes.pop(path, None)
    else:
        _ATTACHED.pop(root.get_submodule(path), None)


def attached_sae(module: nn.Module | None) -> SparseAutoencoder | None:
    return _ATTACHED.get(module) if module is not None else None
