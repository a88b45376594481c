"""Steering vectors: a named direction in a layer's feature space, and where it came from.

A :class:`SteeringVector` holds its values (a 1-d float32 tensor on the CPU),
the name a person gave it, and its ``source``: the file it was read from or the
``diff:A|B`` spec it was computed from. Session files store it by reference
*and* by value: ``{"name", "source", "sha256", "size", "values"}``, the values a
plain JSON list of floats (no pickles), checked against their hash and a size
budget when read back. A vector of more than :data:`MAX_VECTOR_ELEMENTS` is
refused everywhere.

Files: ``.pt``/``.pth`` (``torch.load(weights_only=True)``: tensors and plain
containers only), ``.safetensors`` and ``.npy`` (no object arrays), each
opened as a regular file only (never a FIFO or a device) and refused above
:data:`MAX_VECTOR_FILE_BYTES` before it is parsed. The file must hold one
tensor (or a container with exactly one) that is 1-d, or that squeezes to 1-d.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors.torch import save_file

from ..base.atomic_write import atomic_write
from ..base.errors import InputError, PlanError
from ..base.nested import tensor_leaves
from ..base.regular_file import open_regular
from ..base.user_text import shown
from ..model.inputs import _load_open_file
from ..model.inputs_structured import load_safetensors_input

#: The most features a vector may have (the widest models have ~16-32k).
MAX_VECTOR_ELEMENTS = 1 << 20
#: The largest vector file read (a float64 vector of MAX_VECTOR_ELEMENTS, plus headers).
MAX_VECTOR_FILE_BYTES = 16 << 20
VECTOR_SUFFIXES = (".pt", ".pth", ".safetensors", ".npy")


def values_hash(values: torch.Tensor) -> str:
    """sha256 of the vector's float32 bytes (what a session file checks on reading)."""
    data = values.detach().to("cpu", torch.float32).contiguous()
    return hashlib.sha256(data.numpy().tobytes()).hexdigest()


@dataclass(frozen=True, eq=False)
class SteeringVector:
    """A named direction: ``values`` (1-d float32, CPU) and the ``source`` it came from.

    Two vectors are equal when their values are (name and source are labels).
    """

    name: str
    values: torch.Tensor
    source: str = ""
    sha256: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        v = self.values
        if not isinstance(v, torch.Tensor):
            try:
                v = torch.as_tensor(v, dtype=torch.float32)
            except (TypeError, ValueError, RuntimeError, OverflowError) as exc:
                raise PlanError(f"vector {self.name!r}: values must be numbers: {exc}") from exc
        v = _one_d(v, f"vector {self.name!r}")
        if not v.is_floating_point():
            v = v.to(torch.float32)
        v = v.detach().to("cpu", torch.float32).contiguous()
        if not bool(torch.isfinite(v).all()):
            raise PlanError(f"vector {self.name!r} holds NaN or infinite values; give a finite direction")
        object.__setattr__(self, "values", v)
        object.__setattr__(self, "sha256", values_hash(v))

    @property
    def size(self) -> int:
        return int(self.values.numel())

    @property
    def norm(self) -> float:
        return float(self.values.double().norm())

    def describe(self) -> str:
        return f"{self.name} (|v|={self.norm:.3g}, {self.size})"

    def __str__(self) -> str:  # an editor's text field shows the name
        return self.name

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SteeringVector) and self.sha256 == other.sha256

    def __hash__(self) -> int:
        return hash(self.sha256)

    # -- saving -------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """By reference (``source``) and by value (the floats; JSON has no NaN here: refused)."""
        return {"name": self.name, "source": self.source, "sha256": self.sha256,
                "size": self.size, "values": self.values.tolist()}

    @classmethod
    def from_dict(cls, data: Any) -> "SteeringVector":
        """The vector :meth:`to_dict` wrote; its values checked for type, size and hash."""
        if not isinstance(data, dict):
            raise PlanError(f"a vector must be an object with 'name' and 'values', got {data!r:.80}")
        name, values = data.get("name", "vector"), data.get("values")
        if not isinstance(name, str) or not isinstance(data.get("source", ""), str):
            raise PlanError("a vector's 'name' and 'source' must be strings")
        if not isinstance(values, list):
            raise PlanError(f"vector {name!r}: 'values' must be a list of numbers")
        if len(values) > MAX_VECTOR_ELEMENTS:
            raise PlanError(f"vector {name!r} has {len(values):,} values, above the "
                            f"{MAX_VECTOR_ELEMENTS:,} a vector may have")
        if not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in values):
            raise PlanError(f"vector {name!r}: 'values' must be a flat list of numbers")
        try:
            t = torch.tensor(values, dtype=torch.float32)
        except (OverflowError, RuntimeError) as exc:
            raise PlanError(f"vector {name!r}: values out of float32 range: {exc}") from exc
        vec = cls(name, t, data.get("source", ""))
        want = data.get("sha256")
        if want is not None and want != vec.sha256:
            raise PlanError(f"vector {name!r}: its values do not match their sha256 (the file was "
                            "edited or damaged); rebuild the vector from its source "
                            f"{vec.source!r}")
        return vec


def _one_d(v: torch.Tensor, what: str) -> torch.Tensor:
    if v.numel() > MAX_VECTOR_ELEMENTS:
        raise PlanError(f"{what} has {v.numel():,} values, above the {MAX_VECTOR_ELEMENTS:,} a "
                        "vector may have")
    if v.dim() != 1:
        squeezed = v.reshape(-1) if v.numel() and max(v.shape) == v.numel() else None
        if squeezed is None:
            raise PlanError(f"{what} has shape {tuple(v.shape)}; a vector must be 1-d "
                            "(one value per feature)")
        v = squeezed
    if v.numel() == 0:
        raise PlanError(f"{what} is empty; a vector needs one value per feature")
    if v.is_complex() or v.dtype == torch.bool:
        raise PlanError(f"{what} holds {str(v.dtype).removeprefix('torch.')} values; give real numbers")
    return v


def load_vector_file(path: str | Path, name: str | None = None) -> SteeringVector:
    """A vector read from ``.pt``/``.pth`` (weights only), ``.safetensors`` or ``.npy``."""
    p = Path(os.path.expanduser(str(path)))
    if p.suffix.lower() not in VECTOR_SUFFIXES:
        raise InputError(f"vector file {shown(path)}: use a .pt, .safetensors or .npy file "
                         "holding one 1-d tensor")
    with open_regular(p, "vector file") as f:  # a FIFO or a device is refused, never waited on
        size = os.fstat(f.fileno()).st_size
        if size > MAX_VECTOR_FILE_BYTES:
            raise InputError(f"vector file {shown(path)} is {size:,} bytes, above the "
                             f"{MAX_VECTOR_FILE_BYTES:,} a vector file may hold")
        if p.suffix.lower() == ".safetensors":
            value: Any = None
        else:
            value = _load_open_file(p, f)
    if value is None:
        value = load_safetensors_input(p)
    leaves = tensor_leaves(value)
    if len(leaves) != 1:
        raise InputError(f"vector file {shown(path)} holds {len(leaves)} tensors; save exactly one "
                         "1-d tensor (torch.save(v, path))")
    try:
        return SteeringVector(name or p.stem, leaves[0][1], str(path))
    except PlanError as exc:
        raise InputError(f"vector file {shown(path)}: {exc}") from exc


def save_vector_file(vector: SteeringVector, path: str | Path) -> Path:
    """Write ``vector``'s values (1-d float32) where :func:`load_vector_file` reads them back:
    ``.pt``/``.pth`` (``torch.save`` of the tensor), ``.safetensors`` (one tensor named
    ``vector``) or ``.npy``; whole or not at all."""

    p = Path(os.path.expanduser(str(path)))
    suffix = p.suffix.lower()
    if suffix not in VECTOR_SUFFIXES:
        raise InputError(f"vector file {shown(path)}: use a .pt, .safetensors or .npy file name")
    values = vector.values.contiguous()

    def write(tmp: Path) -> None:
        if suffix == ".safetensors":

            save_file({"vector": values}, str(tmp))
        elif suffix == ".npy":

            with open(tmp, "wb") as f:
                np.save(f, values.numpy(), allow_pickle=False)
        else:
            torch.save(values, tmp)
    return atomic_write(p, write)


def check_width(vec: SteeringVector, width: int, kind: str, path: str) -> None:
    """Refuse a vector whose size is not the layer's feature width, naming both sizes."""
    if vec.size != width:
        raise PlanError(f"{kind}: vector {vec.name!r} has {vec.size} values but layer {path!r} has "
                        f"{width} features on its last axis; build the vector at this layer "
                        "(or one of the same width)")
