"""Interventions: one family of small, pure changes to a layer's output.

Every kind is a frozen dataclass subclass of :class:`Intervention` with

* a registry ``name`` (``"clamp"``) and typed parameters: dataclass fields
  declared with :func:`param`, which carries what an editor or a parser needs
  (type, range, a starting value, help); :meth:`Intervention.params` lists them;
* ``draggable``: the parameters a drag in Live mode changes (clamp bounds, a
  scale factor, a noise level), or ``()``;
* :meth:`~Intervention.apply_tensor`, the change to one tensor leaf: its checks,
  then the kind's plain-torch function of :mod:`.leaf_functions` (``leaf_function``);
  :meth:`~Intervention.apply` walks nested outputs (tuple, list, dict,
  dataclass/ModelOutput): non-tensor leaves pass through, and kinds keep an
  integer output integer;
* :meth:`~Intervention.describe`, :meth:`~Intervention.to_dict` /
  :meth:`~Intervention.from_dict` (session files), :meth:`~Intervention.parse`
  (the CLI's ``KIND:ARGS``), :meth:`~Intervention.bounds` (lines on a
  histogram), and :meth:`~Intervention.to_torch_source`: the same change for the
  exported script, which copies ``leaf_function``'s source (one copy of the arithmetic).

A kind that needs another forward first (:class:`Patch`, :class:`MeanAblate`
with a reference input) names that input in :meth:`~Intervention.pre_pass_input`;
the run does one forward on each distinct source input, and the hook hands
that layer's output of the same call to the kind as ``ctx.source``.

Adding a kind = a class here (or anywhere) + one :func:`register` call in
:mod:`hookscope.core.plan.intervention_registry`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar

import torch

from ..base.errors import PlanError
from .intervention_base import Intervention, InterventionContext, _SourceEq, numeric
from .param_values import Param, check_number, param, py_literal, short_value
from .at import Generated
from .feature_axis import feature_dim
from .leaf_functions import (clamp_leaf, mean_leaf, noise_leaf, patch_leaf, scale_leaf,
                             zero_leaf)
from ..base.nested import map_tensors, tensor_leaves

__all__ = ["Intervention", "InterventionContext", "Param", "param", "Clamp", "Scale", "Zero",
           "MeanAblate", "Noise", "Patch", "map_tensors", "tensor_leaves",
           "feature_dim", "numeric", "py_literal"]


# -- the kinds -----------------------------------------------------------------------

@dataclass(frozen=True)
class Clamp(Intervention):
    """Replace the output with ``output.clamp(lo, hi)``; ``None`` (or ±inf) leaves a side open."""

    lo: float | None = param("float", None, start=-1.0, help="lower bound (empty: none)")
    hi: float | None = param("float", None, start=1.0, help="upper bound (empty: none)")
    name: ClassVar[str] = "clamp"
    per_position: ClassVar[bool] = True
    draggable: ClassVar[tuple[str, ...]] = ("lo", "hi")
    syntax: ClassVar[str] = "clamp:LO:HI (leave one side empty for no bound, e.g. clamp::0.5)"
    leaf_function: ClassVar[Any] = staticmethod(clamp_leaf)

    def __post_init__(self) -> None:
        for side, open_value in (("lo", -math.inf), ("hi", math.inf)):
            v = getattr(self, side)
            if v is None:
                continue
            check_number("clamp", f"bound {side}", v)
            object.__setattr__(self, side, None if v == open_value else float(v))
        lo, hi = self.bounds()
        if lo > hi:
            raise PlanError(f"clamp range [{lo:g}, {hi:g}] is empty: lo must be <= hi; swap the bounds")

    def apply_tensor(self, t: torch.Tensor, ctx: InterventionContext) -> torch.Tensor:
        return clamp_leaf(t, ctx.module, None, self.lo, self.hi)

    def bounds(self) -> tuple[float, float]:
        return (-math.inf if self.lo is None else self.lo, math.inf if self.hi is None else self.hi)

    def describe(self) -> str:
        lo, hi = self.bounds()
        return f"clamp({lo:g}, {hi:g})"


@dataclass(frozen=True)
class Scale(Intervention):
    """Multiply the output by ``factor`` (an integer output is rounded back to integers)."""

    factor: float = param("float", lo=-1e6, hi=1e6, start=1.0, help="multiplier")
    name: ClassVar[str] = "scale"
    per_position: ClassVar[bool] = True
    draggable: ClassVar[tuple[str, ...]] = ("factor",)
    syntax: ClassVar[str] = "scale:FACTOR (e.g. scale:0.5)"
    leaf_function: ClassVar[Any] = staticmethod(scale_leaf)

    def __post_init__(self) -> None:
        check_number("scale", "factor", self.factor)
        object.__setattr__(self, "factor", float(self.factor))

    def apply_tensor(self, t: torch.Tensor, ctx: InterventionContext) -> torch.Tensor:
        return scale_leaf(t, ctx.module, None, self.factor)


@dataclass(frozen=True)
class Zero(Intervention):
    """Zero the whole output, or only ``units`` (indices along the feature axis).

    The feature axis is dim 1 for convolution, norm and pooling outputs and any
    output of 4+ dims (N, C, H, W), the last dim otherwise; ``dim`` overrides it
    (see :func:`feature_dim`).
    """

    units: tuple[int, ...] | None = param("units", None, start=(0,), help="channels/features to zero (empty: all)")
    dim: int | None = param("dim", None, help="feature axis (empty: 1 for conv outputs, else last)")
    name: ClassVar[str] = "zero"
    per_position: ClassVar[bool] = True
    syntax: ClassVar[str] = "zero, or zero:UNITS[:DIM] (e.g. zero:3,7 zeroes features 3 and 7)"
    leaf_function: ClassVar[Any] = staticmethod(zero_leaf)
    leaf_helpers: ClassVar[tuple[Any, ...]] = (feature_dim,)

    def __post_init__(self) -> None:
        if self.units is not None:
            object.__setattr__(self, "units", tuple(int(u) for u in self.units))
            if not self.units:
                object.__setattr__(self, "units", None)
        at = self.where()
        if self.units is not None and at is not None and at.units is not None:
            raise PlanError("zero: units are given twice (zero:UNITS and @units=); give one")

    def apply_tensor(self, t: torch.Tensor, ctx: InterventionContext) -> torch.Tensor:
        if self.units is None:
            return zero_leaf(t, ctx.module, None)
        if t.dim() == 0:
            raise PlanError(f"zero: layer {ctx.path!r} returns a scalar; it has no units to pick")
        d = feature_dim(t, ctx.module, self.dim)
        if not 0 <= d < t.dim():
            raise PlanError(f"zero: dim {self.dim} is out of range for layer {ctx.path!r}'s "
                            f"{t.dim()}-d output")
        n = t.shape[d]
        bad = [u for u in self.units if not -n <= u < n]
        if bad:
            raise PlanError(f"zero: unit(s) {bad} out of range: layer {ctx.path!r} has {n} "
                            f"along dim {d}; pick units in 0..{n - 1}")
        return zero_leaf(t, ctx.module, None, self.units, d)

    def describe(self) -> str:
        if self.units is None:
            return "zero"
        where = f", dim={self.dim}" if self.dim is not None else ""
        return f"zero(units {','.join(map(str, self.units))}{where})"


@dataclass(frozen=True, eq=False)
class MeanAblate(_SourceEq, Intervention):
    """Replace the output by its mean over the batch (dim 0), or by the batch mean of
    this layer's output on a ``reference`` input (one pre-pass, shared with :class:`Patch`).

    The mean is taken per position over dim 0 and broadcast to the output's
    shape; the reference's output must match the target's shape past dim 0.
    """

    reference: Any = param("input", None, help="reference input spec (empty: the batch itself)")
    name: ClassVar[str] = "mean"
    per_position: ClassVar[bool] = True
    syntax: ClassVar[str] = "mean (batch mean), or mean:INPUT (mean over a reference input)"
    leaf_function: ClassVar[Any] = staticmethod(mean_leaf)

    def apply_tensor(self, t: torch.Tensor, ctx: InterventionContext) -> torch.Tensor:
        ref = None
        if self.reference is not None:
            ref = ctx.source_leaf
            if ref is None:
                raise PlanError(f"mean: layer {ctx.path!r} produced no matching output on the "
                                "reference input")
            if tuple(ref.shape[1:]) != tuple(t.shape[1:]):
                raise PlanError(f"mean: layer {ctx.path!r} gives {tuple(ref.shape)} on the reference "
                                f"input but {tuple(t.shape)} on the target; use a reference input "
                                "of the same shape past the batch dim")
        return mean_leaf(t, ctx.module, ref)

    def pre_pass_input(self) -> Any:
        return self.reference

    def describe(self) -> str:
        return "mean(batch)" if self.reference is None else f"mean(of {short_value(self.reference)})"


@dataclass(frozen=True)
class Noise(Intervention):
    """Add Gaussian noise of standard deviation ``std``, drawn from a generator seeded
    with ``seed`` on every call: reproducible, the same for each call of the layer
    (and for each tensor leaf of one shape). The generator lives on the output's
    device, so a CUDA run draws other numbers than a CPU run of the same seed.
    Integer outputs pass through (noise on ids or counts has no meaning)."""

    std: float = param("float", lo=0.0, hi=1e6, start=0.1, help="standard deviation")
    seed: int = param("int", 0, lo=0, hi=2 ** 63 - 1, help="random seed")
    name: ClassVar[str] = "noise"
    draggable: ClassVar[tuple[str, ...]] = ("std",)
    syntax: ClassVar[str] = "noise:STD[:SEED] (e.g. noise:0.1:7)"
    leaf_function: ClassVar[Any] = staticmethod(noise_leaf)

    def __post_init__(self) -> None:
        check_number("noise", "std", self.std, lo=0.0)
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or not 0 <= self.seed < 2 ** 63:
            raise PlanError(f"noise: seed={self.seed!r} must be an integer in [0, 2**63)")
        object.__setattr__(self, "std", float(self.std))

    def apply_tensor(self, t: torch.Tensor, ctx: InterventionContext) -> torch.Tensor:
        return noise_leaf(t, ctx.module, None, self.std, self.seed)

    def acts_per_position(self) -> bool:
        # The draw depends on the shape it fills: only a part of fixed positions is drawn alike.
        at = self.where()
        return (at is not None and at.positions is not None
                and not any(isinstance(i, Generated) for i in at.positions))

    def describe(self) -> str:
        return f"noise(std={self.std:g}, seed={self.seed})"


@dataclass(frozen=True, eq=False)
class Patch(_SourceEq, Intervention):
    """Activation patching: replace the output by this layer's output (same call) in a
    run of the model on ``source_input`` (an input spec string or a tensor).

    Every patched layer (and every :class:`MeanAblate` with the same reference)
    is served by ONE forward on that input, without interventions. Shapes
    must match; every tensor leaf is replaced, bool and integer ones too.
    """

    source_input: Any = param("input", None, help="the source input (spec or tensor)")
    name: ClassVar[str] = "patch"
    per_position: ClassVar[bool] = True
    syntax: ClassVar[str] = "patch (with --source-input X), or patch:INPUT"
    leaf_kinds: ClassVar[str] = "all"
    leaf_function: ClassVar[Any] = staticmethod(patch_leaf)

    def apply_tensor(self, t: torch.Tensor, ctx: InterventionContext) -> torch.Tensor:
        src = ctx.source_leaf
        if src is None:
            raise PlanError(f"patch: layer {ctx.path!r} call {ctx.call} has no output on the source "
                            "input to patch in (it ran fewer times there, or returned other leaves)")
        if tuple(src.shape) != tuple(t.shape):
            raise PlanError(f"patch: layer {ctx.path!r} gives {tuple(src.shape)} on the source input "
                            f"but {tuple(t.shape)} on the target; give a source input of the same shape")
        return patch_leaf(t, ctx.module, src)

    def pre_pass_input(self) -> Any:
        if self.source_input is None:
            raise PlanError("patch needs a source input: Patch('[[...]]') in Python, "
                            "patch:INPUT or --source-input X on the command line")
        return self.source_input

    def describe(self) -> str:
        return f"patch(from {short_value(self.source_input)})"
