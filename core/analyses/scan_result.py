"""A finished scan: statistics per layer, top inputs per unit, the effect per input.

``to_csv()`` gives one row per input (its number, name, label, top prediction and metric
without and with); ``to_json_dict()`` everything but the rows' per-unit arrays in full.
A name that a spreadsheet would read as a formula starts with ``'``.
"""

from __future__ import annotations

import csv
import io
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..base.user_text import as_int, spreadsheet_cell as _cell_text
from ..base.errors import PlanError
from ..base.meaning import OutputMeaning
from ..dataset.input_sets import InputSet
from .layer_accumulator import LayerAccumulator
from .scan_parts import EffectRow, ScanPartial


@dataclass
class LayerSummary:
    """One captured layer over the whole set."""

    path: str
    count: int
    min: float
    max: float
    mean: float
    std: float
    nonfinite: int
    hist_edges: np.ndarray
    hist_counts: np.ndarray
    #: per unit, its mean over inputs and positions
    unit_mean: np.ndarray
    #: [units, k]: per unit its top inputs' activations (best first), input numbers, positions
    top_values: np.ndarray
    top_index: np.ndarray
    top_pos: np.ndarray
    item_shape: tuple[int, ...] = ()
    unit_dim: int | None = None

    @classmethod
    def of(cls, acc: LayerAccumulator) -> "LayerSummary":
        m = acc.moments
        assert acc.hist is not None
        empty = np.zeros((0, 0))
        return cls(acc.path, m.count, m.min, m.max, m.mean if m.count else math.nan, m.std,
                   m.nonfinite, acc.hist.edges, acc.hist.counts.copy(), acc.unit_mean,
                   acc.top_values.numpy() if acc.top_values is not None else empty,
                   acc.top_index.numpy() if acc.top_index is not None else empty.astype(int),
                   acc.top_pos.numpy() if acc.top_pos is not None else empty.astype(int),
                   acc.item_shape or (), acc.unit_dim)

    @property
    def units(self) -> int:
        return len(self.unit_mean)


@dataclass
class TopInput:
    """One of a unit's top inputs: its number, activation, where it peaked and its name;
    for text, the tokens and which one to highlight."""

    index: int
    value: float
    position: int
    name: str
    tokens: list[str] | None = None


@dataclass
class ScanResult:
    inputs: InputSet
    meaning: OutputMeaning
    metric: str
    layers: dict[str, LayerSummary]
    rows: list[EffectRow]
    intervened: bool
    seconds: float = 0.0
    forwards: int = 0
    batch_size: int = 1
    notes: list[str] = field(default_factory=list)

    # -- the effect over the set ------------------------------------------------
    def _fraction(self, values: list[bool | None]) -> float | None:
        known = [v for v in values if v is not None]
        return sum(known) / len(known) if known else None

    @property
    def changed_fraction(self) -> float | None:
        """The fraction of inputs whose top prediction changed (``None``: no intervention
        or no scores)."""
        return self._fraction([r.changed for r in self.rows]) if self.intervened else None

    def accuracy(self, with_: bool = False) -> float | None:
        return self._fraction([r.correct(with_) for r in self.rows])

    def class_name(self, idx: int | None) -> str:
        if idx is None:
            return "(none)"
        names = self.inputs.class_names
        if names and 0 <= idx < len(names) and as_int(names[idx]) == idx:
            return names[idx]
        return self.meaning.label(idx) if self.meaning.labels else str(idx)

    def per_class(self) -> dict[str, dict[str, Any]]:
        """``{class: {"n", "accuracy_without", "accuracy_with"}}`` over labelled inputs."""
        groups: dict[int, list[EffectRow]] = {}
        for r in self.rows:
            if r.label_index is not None:
                groups.setdefault(r.label_index, []).append(r)
        out = {}
        for idx in sorted(groups):
            rs = groups[idx]
            out[self.class_name(idx)] = {
                "n": len(rs), "accuracy_without": self._fraction([r.correct(False) for r in rs]),
                "accuracy_with": (self._fraction([r.correct(True) for r in rs])
                                  if self.intervened else None)}
        return out

    # -- top inputs -------------------------------------------------------------
    def layer(self, path: str) -> LayerSummary:
        if path not in self.layers:
            raise PlanError(f"layer {path!r} was not captured in this scan; captured: "
                            f"{', '.join(self.layers) or 'none'}")
        return self.layers[path]

    def top_inputs(self, path: str, unit: int, codec: Any = None) -> list[TopInput]:
        """Unit ``unit`` of layer ``path``: its top inputs, best first."""
        s = self.layer(path)
        if not -s.units <= unit < s.units:
            raise PlanError(f"unit {unit} is out of range: layer {path!r} has {s.units} units "
                            f"(0..{s.units - 1})")
        unit %= s.units
        codec = codec if codec is not None else self.meaning.codec
        out = []
        for v, i, p in zip(s.top_values[unit], s.top_index[unit], s.top_pos[unit]):
            tokens = None
            if self.inputs.kind == "text" and codec is not None:
                tokens = codec.token_strings(codec.encode(self.inputs.text(int(i)) or ""))
            out.append(TopInput(int(i), float(v), int(p), self.inputs.describe(int(i)), tokens))
        return out

    # -- export -----------------------------------------------------------------
    def to_csv(self) -> str:
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(["index", "input", "label", "pred_without", "pred_with",
                    f"{self.metric}_without", f"{self.metric}_with", "changed"])
        for r in self.rows:
            w.writerow([r.index, _cell_text(self.inputs.describe(r.index)),
                        _cell_text(r.label or ""), _num(r.pred_without), _num(r.pred_with),
                        _num(r.metric_without), _num(r.metric_with),
                        "" if r.changed is None else int(r.changed)])
        return buf.getvalue()

    def to_json_dict(self, top_units: dict[str, list[int]] | None = None) -> dict:
        """Summary, per-class accuracy, per-layer statistics and, for the units named in
        ``top_units`` (``{layer: [unit, ...]}``), their top inputs."""
        layers = {}
        for p, s in self.layers.items():
            layers[p] = {"count": s.count, "min": _f(s.min), "max": _f(s.max), "mean": _f(s.mean),
                         "std": _f(s.std), "nonfinite": s.nonfinite, "units": s.units,
                         "hist": {"edges": [float(e) for e in s.hist_edges],
                                  "counts": [int(c) for c in s.hist_counts]},
                         "unit_mean": [_f(float(v)) for v in s.unit_mean]}
        top = {}
        for p, units in (top_units or {}).items():
            top[p] = {str(u): [{"index": t.index, "value": _f(t.value), "position": t.position,
                                "input": t.name} for t in self.top_inputs(p, u)] for u in units}
        return {"inputs": self.inputs.source, "count": len(self.rows), "metric": self.metric,
                "intervened": self.intervened, "changed_fraction": self.changed_fraction,
                "accuracy_without": self.accuracy(False),
                "accuracy_with": self.accuracy(True) if self.intervened else None,
                "per_class": self.per_class(), "layers": layers, "top": top,
                "forwards": self.forwards, "batch_size": self.batch_size,
                "seconds": round(self.seconds, 3)}


def _f(v: float) -> float | None:
    return v if math.isfinite(v) else None


def _num(v: float | int | None) -> str:
    if v is None:
        return ""
    return str(v) if isinstance(v, int) else repr(float(v))


def finish(part: ScanPartial, request: Any, meaning: OutputMeaning,
           seconds: float = 0.0) -> ScanResult:
    """The merged partial of every shard as a :class:`ScanResult`."""
    layers = {p: LayerSummary.of(acc) for p, acc in part.layers.items()}
    return ScanResult(request.inputs, meaning, part.metric, layers, list(part.rows),
                      bool(request.intervene), seconds, part.forwards, part.batch_size)
