"""A plan: which layers are captured and which get an intervention.

A :class:`Plan` is plain data, built by the CLI, the app or a script. It is
checked on its own when built (``lo > hi``, NaN bounds, one intervention
per layer) and against a model by
:meth:`Plan.resolve`, which turns layer paths into modules, maps a second
path of a shared module onto its first, and names unknown paths with the
closest real ones.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any, Iterable, Mapping, Sequence

from torch import nn

from ..base.errors import PlanError
from .interventions import Clamp, Intervention
from ..model.module_walk import Walk, module_walk
from .intervention_registry import from_dict


#: The suffix that aims at a module's first positional input instead of its output
#: (``transformer.h.3.ln_2:input``), reached through a forward pre-hook.
INPUT_SUFFIX = ":input"


def split_input(path: str) -> tuple[str, bool]:
    """``("a.b", True)`` for ``"a.b:input"``, ``(path, False)`` otherwise."""
    if path.endswith(INPUT_SUFFIX):
        return path[:-len(INPUT_SUFFIX)], True
    return path, False


@dataclass(frozen=True, init=False)
class Plan:
    """What to do to a model during one forward pass.

    Parameters
    ----------
    capture
        Layer paths (as in ``model.named_modules()``) whose outputs are recorded.
    clamp
        Constructor shorthand, not a field: ``{path: (lo, hi)}`` adds ``Clamp(lo, hi)``
        on that layer (``None`` or ``±inf`` for an open side). Read back, ``plan.clamp``
        is a read-only view ``{path: (lo, hi)}`` of every :class:`Clamp` in
        ``interventions`` (open ends ``±inf``), so ``dataclasses.replace(plan,
        interventions=...)`` keeps exactly the clamps the new interventions hold.
    keep_tensors
        Keep the captured tensors (moved to the CPU) as well as their
        statistics. ``False`` keeps only the statistics, computed on the
        device: the way to look at every layer of a large model.
    interventions
        ``{path: Intervention}`` (:class:`Clamp`, :class:`Scale`, :class:`Zero`,
        :class:`MeanAblate`, :class:`Noise`, :class:`Patch`, any registered kind).
        One per layer; after construction this holds every intervention, the
        ``clamp`` shorthand's included.
    """

    capture: Sequence[str] = ()  # any sequence of paths; a tuple once built
    keep_tensors: bool = True
    interventions: Mapping[str, Intervention] = field(default_factory=dict)

    # Written by hand so ``clamp`` can be a keyword without being a field: replace()
    # copies fields only, so it can never hand a plan's old clamps back to the new one.
    def __init__(self, capture: Sequence[str] = (),
                 clamp: Mapping[str, Any] | None = None, keep_tensors: bool = True,
                 interventions: Mapping[str, Intervention] | None = None) -> None:
        if isinstance(capture, str):
            raise PlanError("capture must be a list of layer paths, not one string; "
                            "write capture=['fc1'] or '--capture fc1,fc2'")
        object.__setattr__(self, "capture", tuple(dict.fromkeys(capture)))
        object.__setattr__(self, "keep_tensors", keep_tensors)
        merged: dict[str, Intervention] = {}
        for path, iv in dict(interventions or {}).items():
            if not isinstance(iv, Intervention):
                raise PlanError(f"intervention for layer {path!r} must be an Intervention "
                                f"(Clamp, Scale, Zero, ...), got {iv!r}")
            merged[path] = iv
        for path, bounds in dict(clamp or {}).items():
            new = _clamp_of(path, bounds)
            if path in merged and not isinstance(merged[path], Clamp):
                raise PlanError(f"layer {path!r} has both a clamp and a {merged[path].name} "
                                "intervention; give each layer one")
            merged[path] = new  # the shorthand wins over an older Clamp (replace(plan, clamp=...))
        object.__setattr__(self, "interventions", merged)

    # -- views -----------------------------------------------------------------
    @property
    def clamp(self) -> Mapping[str, tuple[float, float]]:
        """``{path: (lo, hi)}`` of every :class:`Clamp` in the plan, read-only."""
        return MappingProxyType({p: iv.bounds() for p, iv in self.interventions.items()
                                 if isinstance(iv, Clamp)})

    def all_interventions(self) -> dict[str, Intervention]:
        """Every intervention by path, clamps included."""
        return dict(self.interventions)

    def intervention_for(self, path: str) -> Intervention | None:
        """The intervention on ``path``, or ``None``."""
        return self.interventions.get(path)

    def paths(self) -> list[str]:
        """Every layer path the plan touches, capture first."""
        return list(dict.fromkeys([*self.capture, *self.interventions]))

    @property
    def is_empty(self) -> bool:
        return not self.paths()

    # -- edits (plans are immutable; each returns a new one) ------------------
    def with_capture(self, paths: Iterable[str]) -> "Plan":
        return replace(self, capture=tuple(paths))

    def with_intervention(self, path: str, iv: Intervention) -> "Plan":
        """This plan with ``iv`` on ``path`` (replacing what was there)."""
        return replace(self, interventions={**self.interventions, path: iv})

    def without_intervention(self, path: str) -> "Plan":
        """This plan with no intervention on ``path``."""
        return replace(self, interventions={p: iv for p, iv in self.interventions.items()
                                        if p != path})

    def with_clamp(self, path: str, lo: float | None, hi: float | None) -> "Plan":
        try:
            return self.with_intervention(path, Clamp(lo, hi))
        except PlanError as exc:
            raise PlanError(f"layer {path!r}: {exc}") from None

    def without_clamp(self, path: str) -> "Plan":
        """Remove ``path``'s clamp (another kind of intervention there stays)."""
        if isinstance(self.interventions.get(path), Clamp):
            return self.without_intervention(path)
        return self

    # -- saving ------------------------------------------------------------------
    def to_dict(self) -> dict:
        """JSON-ready: ``{"capture": [...], "interventions": {path: {...}}, "keep_tensors": b}``."""
        return {"capture": list(self.capture),
                "interventions": {p: iv.to_dict() for p, iv in self.interventions.items()},
                "keep_tensors": self.keep_tensors}

    @classmethod
    def from_dict(cls, data: Any) -> "Plan":
        """The plan :meth:`to_dict` wrote (an older ``"clamp": {path: [lo, hi]}`` is read too)."""
        if not isinstance(data, dict):
            raise PlanError(f"a plan must be an object with 'capture' and 'interventions', got {data!r}")
        ivs = data.get("interventions") or {}
        if not isinstance(ivs, dict):
            raise PlanError("a plan's 'interventions' must map layer paths to interventions")
        clamp: dict[str, Any] = {p: tuple(None if v is None else float(v) for v in b)
                 for p, b in (data.get("clamp") or {}).items()}
        return cls(capture=tuple(data.get("capture") or ()), clamp=clamp,
                   keep_tensors=bool(data.get("keep_tensors", True)),
                   interventions={p: _intervention_at(p, d) for p, d in ivs.items()})

    # -- checking against a model ---------------------------------------------
    def resolve(self, module: nn.Module, tree: Walk | None = None) -> dict[str, "LayerPlan"]:
        """Check every path against ``module`` and group the work by module.

        Returns ``{canonical_path: LayerPlan}``. A module reachable by two
        paths is one entry under its first path (``named_modules`` order),
        whichever path the plan used. ``tree``: ``module_walk(module)`` where
        the caller has it (a run shares it with its snapshot).
        """
        by_name: dict[str, nn.Module] = {}
        canonical: dict[int, str] = {}  # a module's first path, as named_modules() gives it
        for p, m in tree if tree is not None else module_walk(module):
            by_name[p] = m
            canonical.setdefault(id(m), p)
        interventions = self.all_interventions()
        capture = set(self.capture)  # a set: plans of thousands of layers stay linear
        out: dict[str, LayerPlan] = {}
        for path in self.paths():
            real = path
            if path.startswith("resid_"):
                from .residual_points import is_residual_name, mid_points, residual_target

                if is_residual_name(path) and path not in by_name:
                    real = residual_target(path, by_name)
                    mid = mid_points(by_name).get(path)
                    if mid is not None and mid[1] is not None:
                        _mid_plan(out, path, by_name[mid[0]], by_name[mid[1]], capture,
                                  interventions)
                        continue
            base, at_input = split_input(real)
            if base not in by_name:
                raise PlanError(unknown_layer_message(path, list(canonical.values())))
            mod = by_name[base]
            key = canonical[id(mod)] + (INPUT_SUFFIX if at_input else "")
            lp = out.setdefault(key, LayerPlan(path=key, module=mod, at_input=at_input))
            if path in capture:
                lp.capture = True
            if path in interventions:
                if lp.intervention is not None and lp.intervention != interventions[path]:
                    raise PlanError(f"layers {key!r} and {path!r} are the same module with "
                                    "different interventions; give it one")
                lp.intervention = interventions[path]
        for key, lp in out.items():
            at = lp.intervention.where() if lp.intervention is not None else None
            if at is not None and at.heads is not None:
                if lp.at_input or lp.mid_block is not None:
                    raise PlanError(f"layer {key!r}: @heads acts at an attention's output "
                                    "projection; aim at the attention module, not an input")
                from .heads import head_site

                lp.head_site = head_site(lp.module, key)
                from .at import resolve

                resolve(at.heads, lp.head_site.n_heads, "heads", f" in layer {key!r}")
        return out


def _mid_plan(out: dict[str, "LayerPlan"], name: str, attention: nn.Module,
              block: nn.Module, capture: set[str], interventions: Mapping[str, Any]) -> None:
    """The LayerPlan of a ``resid_mid.N`` reached through ``attention`` (see
    :mod:`.residual_points`), under its own name."""
    lp = out.setdefault(name, LayerPlan(path=name, module=attention, mid_block=block))
    lp.capture = lp.capture or name in capture
    if name in interventions:
        lp.intervention = interventions[name]



def _intervention_at(path: str, data: Any) -> Intervention:
    """The intervention ``data`` describes, an error naming the layer otherwise."""

    try:
        return from_dict(data)
    except PlanError as exc:
        raise PlanError(f"layer {path!r}: {exc}") from exc
    except (TypeError, ValueError, ArithmeticError) as exc:  # e.g. a 400-digit int as a float
        raise PlanError(f"layer {path!r}: {data!r:.80}: {exc}") from exc


def _clamp_of(path: str, bounds: Any) -> Clamp:
    if isinstance(bounds, Clamp):
        return bounds
    try:
        lo, hi = bounds
        lo = None if lo is None else float(lo)
        hi = None if hi is None else float(hi)
    except (TypeError, ValueError) as exc:
        raise PlanError(f"clamp for layer {path!r} must be a (lo, hi) pair of numbers, "
                        f"got {bounds!r}") from exc
    try:
        return Clamp(lo, hi)
    except PlanError as exc:
        raise PlanError(f"layer {path!r}: {exc}") from None


@dataclass
class LayerPlan:
    """The work for one module: capture it, intervene on it, or both."""

    path: str
    module: nn.Module
    capture: bool = False
    intervention: Intervention | None = None
    #: Where the intervention's heads are acted on (core/plan/heads.py), when it picks heads.
    head_site: Any = None
    #: At the module's first positional input (``PATH:input``, a forward pre-hook) instead
    #: of its output.
    at_input: bool = False
    #: ``resid_mid.N`` reached through the attention module ``module``: the block whose
    #: input is added to the attention output (see core/plan/residual_points.py).
    mid_block: nn.Module | None = None


def unknown_layer_message(path: str, known: list[str]) -> str:
    close = difflib.get_close_matches(path, known, n=3, cutoff=0.5)
    hint = f" Did you mean {', '.join(repr(c) for c in close)}?" if close else ""
    shown = ", ".join(repr(k) for k in known[1:13]) + (", ..." if len(known) > 13 else "")
    return (f"unknown layer {path!r}: no module has that path.{hint} "
            f"Layers of this model: {shown or '(none)'}")
