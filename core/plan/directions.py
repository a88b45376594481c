"""Directions: steering (:class:`Add`) and directional ablation (:class:`Project`).

Both act along a :class:`~hookscope.core.plan.steer_vector.SteeringVector` on the
*last* axis of a layer's output (the feature axis of Linear, attention,
embedding and block outputs: ``(..., features)``). Tensor leaves whose last
axis is not the vector's width pass through unchanged (a GPT-2 block's cache
tensors); a layer none of whose floating leaves has that width is refused
with both sizes. Integer and bool leaves pass through.

On the command line a kind names a vector defined with ``--vector``
(``add:NAME:ALPHA``); until :func:`bind_vectors` gives it its values the
intervention holds the name only, and running it says which ``--vector`` is
missing.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, ClassVar, Mapping

import torch

from ..base.errors import PlanError
from ..base.user_text import typed_text
from .intervention_base import Intervention, InterventionContext
from .param_values import check_number, param, py_literal
from .at import At, resolve, selector_text
from .leaf_functions import add_leaf, feature_dim, project_leaf
from ..base.nested import map_tensors_keyed, tensor_leaves
from .steer_vector import SteeringVector, check_width

_TRUE = ("1", "true", "yes", "on", "norm")
_FALSE = ("", "0", "false", "no", "off", "raw")


def _as_vector(kind: str, v: Any) -> SteeringVector | str:
    """A vector parameter from Python, JSON or text: a vector, or a name still to bind."""
    if isinstance(v, SteeringVector):
        return v
    if isinstance(v, str):
        if not v.strip():
            raise PlanError(f"{kind} needs a vector: {kind}:NAME with --vector NAME=..., or a "
                            "SteeringVector in Python")
        return typed_text(v)  # a diff: spec's trailing spaces end its last prompt: tokens
    if isinstance(v, dict):
        return SteeringVector.from_dict(v)
    if isinstance(v, torch.Tensor):
        return SteeringVector("vector", v)
    raise PlanError(f"{kind}: the vector must be a SteeringVector, a tensor or a name, got {v!r:.80}")


def _as_bool(kind: str, v: Any) -> bool:
    if isinstance(v, bool):
        return v
    if isinstance(v, str) and v.strip().lower() in _TRUE + _FALSE:
        return v.strip().lower() in _TRUE
    if isinstance(v, int) and v in (0, 1):
        return bool(v)
    raise PlanError(f"{kind}: norm_units must be true or false (on the command line: norm), got {v!r}")


class _Directional(Intervention):
    """What :class:`Add` and :class:`Project` share: a vector, bound or by name."""

    vector: Any

    def bound(self, ctx: InterventionContext) -> SteeringVector:
        vec = self.vector
        if isinstance(vec, str) and vec.startswith(("diff:", "diffmean:")):
            raise PlanError(f"{self.name}: the vector {vec!r} is computed where the model runs "
                            "(the window's runner, hookscope run, a Ray actor); run it there")
        if not isinstance(vec, SteeringVector):
            raise PlanError(f"{self.name}: vector {vec!r} has no values: define it with "
                            f"--vector {vec}=diff:INPUT_A|INPUT_B or --vector {vec}=FILE")
        return vec

    def applies_to(self, t: torch.Tensor) -> bool:
        vec = self.vector
        return (t.is_floating_point() and t.dim() >= 1 and isinstance(vec, SteeringVector)
                and t.shape[-1] == vec.size)

    def apply(self, value: Any, context: InterventionContext | None = None) -> Any:
        ctx = context or InterventionContext()
        vec = self.bound(ctx)
        floats = [t for _, t in tensor_leaves(value) if t.is_floating_point() and t.dim() >= 1]
        if floats and not any(t.shape[-1] == vec.size for t in floats):
            check_width(vec, floats[0].shape[-1], self.name, ctx.path)
        at = self.where()
        if at is not None and at.units is not None:
            return self._on_units(value, ctx, vec, at)
        return super().apply(value, context)

    def _on_units(self, value: Any, ctx: InterventionContext, vec: SteeringVector, at: At) -> Any:
        """``@units=``: the change this kind makes along the whole feature axis (the vector
        is ``size`` wide; narrowed to a few units it would fit no output), kept on the
        selected units only; the other units keep their values."""
        where = f" of layer {ctx.path!r}" if ctx.path else ""
        units = resolve(at.units, vec.size, "units", where) or list(range(vec.size))
        for _, t in tensor_leaves(value):
            if self.applies_to(t) and feature_dim(t, ctx.module) != t.dim() - 1:
                raise PlanError(f"{self.name}@units={selector_text(at.units)}: the output{where} "
                                f"{tuple(t.shape)} has its units on axis {feature_dim(t, ctx.module)}, "
                                "but the vector acts along the last axis; leave out @units=")
        whole = dataclasses.replace(self, at=dataclasses.replace(at, units=None))
        changed = dict(tensor_leaves(whole.apply(value, ctx)))
        idx_cache: dict[torch.device, torch.Tensor] = {}

        def keep(t: torch.Tensor, key: str) -> torch.Tensor:
            new = changed.get(key)
            if new is None or new is t or not self.applies_to(t):
                return t
            idx = idx_cache.setdefault(t.device, torch.tensor(units, device=t.device))
            out = t.clone()
            out.index_copy_(-1, idx, new.index_select(-1, idx).to(t.dtype))
            return out

        return map_tensors_keyed(keep, value)

    def to_dict(self) -> dict[str, Any]:
        d = super().to_dict()
        d["vector"] = self.vector.to_dict() if isinstance(self.vector, SteeringVector) else self.vector
        return d

    def leaf_source(self) -> str:
        vec = self.vector
        at = self.where()
        if at is not None and at.units is not None:
            raise PlanError(f"{self.name}@units=: the exported script cannot aim a vector at "
                            "some units yet; export without @units=")
        if not isinstance(vec, SteeringVector):
            raise PlanError(f"{self.name}: vector {vec!r} has no values to export yet: run the model "
                            "once (a diff: vector is computed by the run), or define it with "
                            "--vector")
        kwargs = [f"vector={py_literal(vec.values)}"]
        kwargs += [f"{k}={py_literal(v)}" for k, v in self.values().items() if k != "vector"]
        return f"functools.partial({self.leaf_name()}, {', '.join(kwargs)})"

    def _vector_words(self) -> str:
        vec = self.vector
        if isinstance(vec, SteeringVector):
            return vec.name
        return vec if len(vec) <= 40 else vec[:37] + "..."


@dataclass(frozen=True)
class Add(_Directional):
    """Steering: add ``alpha`` x the vector along the last axis (``norm_units``: alpha times
    the layer's typical activation norm on this input, along the unit direction)."""

    vector: Any = param("vector", help="the direction (--vector NAME=...)")
    alpha: float = param("float", 1.0, lo=-1e6, hi=1e6, help="strength")
    norm_units: bool = param("bool", False, help="alpha in units of the layer's mean activation norm")
    name: ClassVar[str] = "add"
    draggable: ClassVar[tuple[str, ...]] = ("alpha",)
    syntax: ClassVar[str] = ("add:VECTOR[:ALPHA[:norm]] (a --vector NAME; norm: ALPHA in units of "
                             "the layer's mean activation norm)")
    leaf_function: ClassVar[Any] = staticmethod(add_leaf)

    def __post_init__(self) -> None:
        object.__setattr__(self, "vector", _as_vector("add", self.vector))
        check_number("add", "alpha", self.alpha)
        object.__setattr__(self, "alpha", float(self.alpha))
        object.__setattr__(self, "norm_units", _as_bool("add", self.norm_units))
        if isinstance(self.vector, SteeringVector):
            self._unit_direction(self.vector)

    def acts_per_position(self) -> bool:
        return not self.norm_units  # norm: the mean activation norm over every position

    def apply_tensor(self, t: torch.Tensor, ctx: InterventionContext) -> torch.Tensor:
        return add_leaf(t, ctx.module, None, self.bound(ctx).values, self.alpha, self.norm_units)

    def bound(self, ctx: InterventionContext) -> SteeringVector:
        return self._unit_direction(super().bound(ctx))

    def _unit_direction(self, vec: SteeringVector) -> SteeringVector:
        """``vec``; refused when ``norm_units`` needs its direction and it has none (an
        all-zero vector would divide by zero: NaN everywhere)."""
        if self.norm_units and vec.norm == 0:
            raise PlanError(f"add: vector {vec.name!r} is all zeros; norm (alpha in units of the "
                            "activation norm, along the vector's direction) needs a direction: "
                            "leave out :norm or give a nonzero vector")
        return vec

    def describe(self) -> str:
        unit = " x|x|" if self.norm_units else ""
        return f"add({self._vector_words()} x {self.alpha:g}{unit})"


@dataclass(frozen=True)
class Project(_Directional):
    """Directional ablation: remove the component along the (normalised) vector,
    ``x - (x . u) u`` on the last axis."""

    vector: Any = param("vector", help="the direction to remove (--vector NAME=...)")
    name: ClassVar[str] = "project"
    per_position: ClassVar[bool] = True
    syntax: ClassVar[str] = "project:VECTOR (a --vector NAME; removes that direction)"
    leaf_function: ClassVar[Any] = staticmethod(project_leaf)

    def __post_init__(self) -> None:
        vec = _as_vector("project", self.vector)
        if isinstance(vec, SteeringVector) and vec.norm == 0:
            raise PlanError(f"project: vector {vec.name!r} is all zeros; it has no direction to remove")
        object.__setattr__(self, "vector", vec)

    def apply_tensor(self, t: torch.Tensor, ctx: InterventionContext) -> torch.Tensor:
        return project_leaf(t, ctx.module, None, self.bound(ctx).values)

    def describe(self) -> str:
        return f"project(out {self._vector_words()})"


def bind_vectors(interventions: Mapping[str, Intervention],
                 vectors: Mapping[str, SteeringVector]) -> dict[str, Intervention]:
    """``interventions`` with every vector named by text replaced by its values from ``vectors``."""
    out: dict[str, Intervention] = {}
    for path, iv in interventions.items():
        if isinstance(iv, _Directional) and _is_name(iv.vector):
            vec = vectors.get(iv.vector)
            if vec is None:
                known = ", ".join(sorted(vectors)) or "none"
                raise PlanError(f"layer {path!r}: {iv.name} names vector {iv.vector!r}, which no "
                                f"--vector defines (defined: {known}); add --vector "
                                f"{iv.vector}=diff:INPUT_A|INPUT_B or --vector {iv.vector}=FILE")
            iv = iv.with_value("vector", vec)
        out[path] = iv
    return out


def named_vectors(interventions: Mapping[str, Intervention]) -> dict[str, list[str]]:
    """``{vector name: [layer paths]}`` of the directional interventions still unbound."""
    out: dict[str, list[str]] = {}
    for path, iv in interventions.items():
        if isinstance(iv, _Directional) and _is_name(iv.vector):
            out.setdefault(iv.vector, []).append(path)
    return out


def _is_name(v: Any) -> bool:
    """A vector given by a ``--vector`` name (not yet bound, and not a ``diff:`` spec)."""
    return isinstance(v, str) and not v.startswith(("diff:", "diffmean:"))
