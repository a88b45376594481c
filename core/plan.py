"""A plan: which layers are captured and which get an intervention.

A :class:`Plan` is plain data, built by the CLI, the app or a script. It is
checked on its own when built (``lo > hi``, NaN bounds) and against a model by
:meth:`Plan.resolve`, which turns layer paths into modules, maps a second
path of a shared module onto its first, and names unknown paths with the
closest real ones.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field, replace
from typing import Iterable, Mapping

from torch import nn

from .errors import PlanError
from .interventions import Clamp, Intervention


@dataclass(frozen=True)
class Plan:
    """What to do to a model during one forward pass.

    Parameters
    ----------
    capture
        Layer paths (as in ``model.named_modules()``) whose outputs are recorded.
    clamp
        ``{path: (lo, hi)}``: that layer's output is replaced by ``output.clamp(lo, hi)``.
    keep_tensors
        Keep the captured tensors (moved to the CPU) as well as their
        statistics. ``False`` keeps only the statistics, computed on the
        device: the way to look at every layer of a large model.
    interventions
        Other interventions (:class:`~hookscope.core.interventions.Scale`, ...) by path.
    """

    capture: tuple[str, ...] = ()
    clamp: Mapping[str, tuple[float, float]] = field(default_factory=dict)
    keep_tensors: bool = True
    interventions: Mapping[str, Intervention] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if isinstance(self.capture, str):
            raise PlanError("capture must be a list of layer paths, not one string; "
                            "write capture=['fc1'] or '--capture fc1,fc2'")
        object.__setattr__(self, "capture", tuple(dict.fromkeys(self.capture)))
        clamps: dict[str, Clamp] = {}
        for path, bounds in dict(self.clamp).items():
            if isinstance(bounds, Clamp):
                clamps[path] = bounds
                continue
            try:
                lo, hi = bounds
                lo, hi = float(lo), float(hi)
            except (TypeError, ValueError) as exc:
                raise PlanError(f"clamp for layer {path!r} must be a (lo, hi) pair of numbers, "
                                f"got {bounds!r}") from exc
            try:
                clamps[path] = Clamp(lo, hi)
            except PlanError as exc:
                raise PlanError(f"layer {path!r}: {exc}") from None
        object.__setattr__(self, "clamp", {p: c.bounds for p, c in clamps.items()})
        both = set(clamps) & set(self.interventions)
        if both:
            raise PlanError(f"layer(s) {sorted(both)} have both a clamp and another "
                            "intervention; give each layer one")

    # -- views -----------------------------------------------------------------
    def all_interventions(self) -> dict[str, Intervention]:
        """Every intervention by path, clamps included."""
        out: dict[str, Intervention] = {p: Clamp(lo, hi) for p, (lo, hi) in self.clamp.items()}
        out.update(self.interventions)
        return out

    def paths(self) -> list[str]:
        """Every layer path the plan touches, capture first."""
        return list(dict.fromkeys([*self.capture, *self.clamp, *self.interventions]))

    @property
    def is_empty(self) -> bool:
        return not self.paths()

    # -- edits (plans are immutable; each returns a new one) ------------------
    def with_capture(self, paths: Iterable[str]) -> "Plan":
        return replace(self, capture=tuple(paths))

    def with_clamp(self, path: str, lo: float, hi: float) -> "Plan":
        clamp = dict(self.clamp)
        clamp[path] = (lo, hi)
        return replace(self, clamp=clamp)

    def without_clamp(self, path: str) -> "Plan":
        clamp = {p: b for p, b in self.clamp.items() if p != path}
        return replace(self, clamp=clamp)

    # -- checking against a model ---------------------------------------------
    def resolve(self, module: nn.Module) -> dict[str, "LayerPlan"]:
        """Check every path against ``module`` and group the work by module.

        Returns ``{canonical_path: LayerPlan}``. A module reachable by two
        paths is one entry under its first path (``named_modules`` order),
        whichever path the plan used.
        """
        by_name = dict(module.named_modules(remove_duplicate=False))
        canonical = {id(m): p for p, m in module.named_modules()}
        interventions = self.all_interventions()
        capture = set(self.capture)  # a set: plans of thousands of layers stay linear
        out: dict[str, LayerPlan] = {}
        for path in self.paths():
            if path not in by_name:
                raise PlanError(unknown_layer_message(path, list(canonical.values())))
            mod = by_name[path]
            key = canonical[id(mod)]
            lp = out.setdefault(key, LayerPlan(path=key, module=mod))
            if path in capture:
                lp.capture = True
            if path in interventions:
                if lp.intervention is not None and lp.intervention != interventions[path]:
                    raise PlanError(f"layers {key!r} and {path!r} are the same module with "
                                    "different interventions; give it one")
                lp.intervention = interventions[path]
        return out


@dataclass
class LayerPlan:
    """The work for one module: capture it, intervene on it, or both."""

    path: str
    module: nn.Module
    capture: bool = False
    intervention: Intervention | None = None


def unknown_layer_message(path: str, known: list[str]) -> str:
    close = difflib.get_close_matches(path, known, n=3, cutoff=0.5)
    hint = f" Did you mean {', '.join(repr(c) for c in close)}?" if close else ""
    shown = ", ".join(repr(k) for k in known[1:13]) + (", ..." if len(known) > 13 else "")
    return (f"unknown layer {path!r}: no module has that path.{hint} "
            f"Layers of this model: {shown or '(none)'}")
