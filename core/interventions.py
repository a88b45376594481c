"""Interventions: small pure functions on one layer's output.

A layer may return a tensor or a nested structure (tuple, namedtuple, list,
dict, dataclass) of tensors and other things. :func:`map_tensors` applies a
function to every tensor leaf and passes everything else through unchanged,
so every intervention works on nested outputs for free.

Each intervention is a frozen dataclass with ``apply(value)``; the hook layer
never needs to know which kind it holds. Clamp is the one the app drives; the
others are here for scripts and for the room the design leaves for more.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any, Callable

import torch

from .errors import PlanError


def map_tensors(fn: Callable[[torch.Tensor], torch.Tensor], value: Any) -> Any:
    """Apply ``fn`` to every tensor leaf of ``value``; keep the structure."""
    if isinstance(value, torch.Tensor):
        return fn(value)
    if isinstance(value, tuple):
        items = [map_tensors(fn, v) for v in value]
        return type(value)(*items) if hasattr(value, "_fields") else tuple(items)
    if isinstance(value, list):
        return [map_tensors(fn, v) for v in value]
    if isinstance(value, dict):
        return type(value)((k, map_tensors(fn, v)) for k, v in value.items())
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        changes = {f.name: map_tensors(fn, getattr(value, f.name))
                   for f in dataclasses.fields(value) if f.init}
        return dataclasses.replace(value, **changes)
    return value


def tensor_leaves(value: Any, prefix: str = "") -> list[tuple[str, torch.Tensor]]:
    """Every tensor leaf of ``value`` with a key saying where it sits.

    Keys read like Python: ``""`` for a bare tensor, ``"[0]"``, ``"['logits']"``,
    ``".hidden"``. Order is the structure's own order, so the first leaf is the
    layer's "main" output for tuples such as ``(attn_output, attn_weights)``.
    """
    out: list[tuple[str, torch.Tensor]] = []
    if isinstance(value, torch.Tensor):
        out.append((prefix, value))
    elif isinstance(value, (tuple, list)):
        for i, v in enumerate(value):
            out.extend(tensor_leaves(v, f"{prefix}[{i}]"))
    elif isinstance(value, dict):
        for k, v in value.items():
            out.extend(tensor_leaves(v, f"{prefix}[{k!r}]"))
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        for f in dataclasses.fields(value):
            out.extend(tensor_leaves(getattr(value, f.name), f"{prefix}.{f.name}"))
    return out


def _numeric(t: torch.Tensor) -> bool:
    return t.dtype != torch.bool and not t.is_complex()


def clamp_tensor(t: torch.Tensor, lo: float, hi: float) -> torch.Tensor:
    """``t.clamp(lo, hi)`` that keeps an integer tensor integer.

    Float bounds would promote an integer output (token ids, counts) to float
    and feed fractions downstream; the bounds are rounded inward instead.
    """
    if t.is_floating_point():
        return t.clamp(lo, hi)
    ilo = None if math.isinf(lo) else math.ceil(lo)
    ihi = None if math.isinf(hi) else math.floor(hi)
    return t if ilo is None and ihi is None else t.clamp(ilo, ihi)


class Intervention:
    """Base: a change to a layer's output. Subclasses define ``apply_tensor``."""

    kind = "intervention"

    def apply(self, value: Any) -> Any:
        return map_tensors(lambda t: self.apply_tensor(t) if _numeric(t) else t, value)

    def apply_tensor(self, t: torch.Tensor) -> torch.Tensor:  # pragma: no cover - abstract
        raise NotImplementedError

    def describe(self) -> str:
        return self.kind


@dataclass(frozen=True)
class Clamp(Intervention):
    """Replace the output with ``output.clamp(lo, hi)``."""

    lo: float
    hi: float
    kind = "clamp"

    def __post_init__(self) -> None:
        for name in ("lo", "hi"):
            v = getattr(self, name)
            if not isinstance(v, (int, float)) or math.isnan(float(v)):
                raise PlanError(f"clamp bound {name}={v!r} is not a number; give a float such as -0.5")
        if self.lo > self.hi:
            raise PlanError(f"clamp range [{self.lo}, {self.hi}] is empty: lo must be <= hi; swap the bounds")

    def apply_tensor(self, t: torch.Tensor) -> torch.Tensor:
        return clamp_tensor(t, self.lo, self.hi)

    @property
    def bounds(self) -> tuple[float, float]:
        return (float(self.lo), float(self.hi))

    def describe(self) -> str:
        return f"clamp({self.lo:g}, {self.hi:g})"


@dataclass(frozen=True)
class Scale(Intervention):
    """Multiply the output by ``factor``."""

    factor: float
    kind = "scale"

    def apply_tensor(self, t: torch.Tensor) -> torch.Tensor:
        return t * self.factor

    def describe(self) -> str:
        return f"scale({self.factor:g})"


@dataclass(frozen=True)
class Zero(Intervention):
    """Ablate the output: replace it with zeros."""

    kind = "zero"

    def apply_tensor(self, t: torch.Tensor) -> torch.Tensor:
        return torch.zeros_like(t)


@dataclass(frozen=True)
class Noise(Intervention):
    """Add Gaussian noise of standard deviation ``std`` (seeded, reproducible)."""

    std: float
    seed: int = 0
    kind = "noise"

    def apply_tensor(self, t: torch.Tensor) -> torch.Tensor:
        if not t.is_floating_point():
            return t
        g = torch.Generator(device=t.device).manual_seed(self.seed)
        return t + self.std * torch.randn(t.shape, generator=g, device=t.device, dtype=t.dtype)

    def describe(self) -> str:
        return f"noise(std={self.std:g}, seed={self.seed})"
