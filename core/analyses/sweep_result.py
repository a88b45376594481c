"""A sweep's result: its grid of numbers with labelled axes (JSON, CSV, any cell re-run as a
full comparison), and how computed cells (:mod:`.sweep_cells`) become one, normalised and
with estimates and verified cells where the sweep has them. :mod:`.sweep` runs a sweep over
one input, :mod:`.sweep_inputs` over an input set; both finish here.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import itertools
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

import numpy as np
import torch

from ..base.user_text import spreadsheet_cell as _cell_text
from ..base.errors import PlanError
from ..engine.receipts import Receipt
from ..engine.run import RunResult, compare
from ..plan.plan import Plan
from .sweep_axes import POSITION_AXES, positions_of
from .sweep_cells import CellValue, SweepContext, values_array
from .sweep_metrics import finite_or_none, normalised
from .sweep_estimate import spearman


@dataclass
class SweepResult:
    """A sweep's numbers, shaped by its axes (in the order given)."""

    values: np.ndarray
    #: axis name -> a label per value (layer paths, ``3 'cat'`` for a position, numbers)
    axes: dict[str, list[str]]
    #: axis name -> the values themselves
    coords: dict[str, list[Any]]
    metric: str
    #: the metric on the baseline run (``None`` for a metric of a difference)
    baseline: float | None
    #: cell index (a tuple, one entry per axis) -> what each intervention did in that cell
    receipts: dict[tuple[int, ...], dict[str, Receipt]]
    timings_ms: dict[str, float] = field(default_factory=dict)
    #: forwards run: baselines, source passes and intervened ones (a batched forward is one),
    #: and an estimate's forward with gradients (``gradient``; it is the baseline too where the
    #: sweep shares one, see :mod:`.sweep_estimate`)
    forwards: dict[str, int] = field(default_factory=dict)
    _cell: Callable[[Mapping[str, Any]], RunResult] | None = field(default=None, repr=False)
    _plan: Callable[[Mapping[str, Any]], Plan] | None = field(default=None, repr=False)
    #: cells run as rows of batched forwards: ``cells`` (how many), ``rows`` (a forward's
    #: rows), ``forwards``, ``note`` (why cells ran one by one, ``None`` if none did for a
    #: reason worth saying)
    batch: dict[str, Any] = field(default_factory=dict)
    #: ``{"clean": m_clean, "source": m_source}`` where the values are normalised
    normalised: dict[str, float] | None = None
    #: the values before normalising (``None`` when not normalised)
    raw_values: np.ndarray | None = field(default=None, repr=False)
    #: every cell's first-order estimate, in the shape and on the scale of :attr:`values`
    #: (``None`` unless the sweep was estimated; see :mod:`.sweep_estimate`)
    estimates: np.ndarray | None = None
    #: the cells run for real beside their estimates: ``{"cells": [[i, j], ...],
    #: "estimates": [...], "values": [...], "spearman": r}`` (``None`` unless estimated)
    verified: dict[str, Any] | None = None
    #: over an input set (see :mod:`.sweep_inputs`): each cell's standard deviation over the
    #: inputs, every input's own grid (first axis: the input) and the inputs' names;
    #: ``None`` for a sweep of one input
    spread: np.ndarray | None = None
    per_input: np.ndarray | None = field(default=None, repr=False)
    inputs: list[str] | None = None
    #: over an input set with estimates: every input's own estimates (first axis: the input)
    estimates_per_input: np.ndarray | None = field(default=None, repr=False)

    @property
    def cells(self) -> int:
        return int(self.values.size)

    @property
    def batched(self) -> int:
        """How many cells ran as rows of batched forwards (0: every one alone; see
        :attr:`batch` for why)."""
        return int(self.batch.get("cells", 0))

    def index(self, **coords: Any) -> tuple[int, ...]:
        """The cell at these coordinates (each a value or a label of its axis)."""
        if set(coords) != set(self.axes):
            raise PlanError(f"name one value of every axis ({', '.join(self.axes)}), got "
                            f"{', '.join(coords) or 'none'}")
        idx = []
        for name in self.axes:
            v = coords[name]
            if v in self.coords[name]:
                idx.append(self.coords[name].index(v))
            elif str(v) in self.axes[name]:
                idx.append(self.axes[name].index(str(v)))
            else:
                raise PlanError(f"{v!r} is no value of axis {name!r}")
        return tuple(idx)

    def value(self, **coords: Any) -> float:
        return float(self.values[self.index(**coords)])

    def run_cell(self, **coords: Any) -> RunResult:
        """That cell's comparison again, as a full :class:`~.run.RunResult`."""
        idx = self.index(**coords)
        if self._cell is None:
            raise PlanError("this sweep result was read from a file or is a mean over an input "
                            "set: it cannot run one cell again (run_cell is one input's run)")
        return self._cell({n: self.coords[n][i] for n, i in zip(self.axes, idx)})

    def plan_of(self, **coords: Any) -> Plan:
        """That cell's plan, its intervened layers captured (to look at the cell in full)."""
        idx = self.index(**coords)
        if self._plan is None:
            raise PlanError("this sweep result was read from a file: it has no plans")
        plan = self._plan({n: self.coords[n][i] for n, i in zip(self.axes, idx)})
        return dataclasses.replace(plan, capture=tuple(plan.interventions), keep_tensors=True)

    def _indexed(self) -> list[str]:
        """The axes whose labels dress an integer (``3 't'`` for position 3): their files
        give the integer too, in a column (``pos_index``) or ``coords`` of its own."""
        return [n for n in self.axes
                if all(isinstance(c, int) and not isinstance(c, bool) for c in self.coords[n])
                and [str(c) for c in self.coords[n]] != list(self.axes[n])]

    def to_json_dict(self) -> dict:
        return {"axes": {k: list(v) for k, v in self.axes.items()},
                "coords": {n: [int(c) for c in self.coords[n]] for n in self._indexed()},
                "values": _nested(self.values),
                "metric": self.metric, "baseline": finite_or_none(self.baseline),
                "cells": self.cells, "forwards": dict(self.forwards),
                "batched": dict(self.batch),
                **({"normalised": dict(self.normalised)} if self.normalised is not None else {}),
                **({"estimates": _nested(self.estimates), "verified": self.verified}
                   if self.estimates is not None else {}),
                **({"inputs": list(self.inputs), "spread": _nested(self.spread),
                    "per_input": _nested(self.per_input)}
                   if self.per_input is not None and self.spread is not None
                   and self.inputs is not None else {}),
                "timings_ms": {k: round(v, 3) for k, v in self.timings_ms.items()}}

    def to_csv(self) -> str:
        """One row per cell: each axis's label (and, for positions or units, its integer in a
        ``NAME_index`` column), then the number (over an input set: the mean, its ``spread``
        and one ``input_I`` column per input, I counting from 0). A label that a spreadsheet would read as a formula (``=``, ``+``, ``-``, ``@`` and not a number) starts with ``'``."""
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        est = self.estimates
        names = list(self.axes)
        indexed = self._indexed()
        spread, per_input = self.spread, self.per_input
        w.writerow([*(h for n in names for h in ((n, f"{n}_index") if n in indexed else (n,))),
                    self.metric, *(["estimate"] if est is not None else []),
                    *(["spread", *(f"input_{i}" for i in range(len(per_input)))]
                      if spread is not None and per_input is not None else [])])
        for idx in itertools.product(*(range(len(self.axes[n])) for n in names)):
            cells = []
            for n, i in zip(names, idx):
                cells.append(_cell_text(self.axes[n][i]))
                if n in indexed:
                    cells.append(str(int(self.coords[n][i])))
            more = [] if est is None else [_number(float(est[idx]))]
            if spread is not None and per_input is not None:
                more += [_number(float(spread[idx])),
                         *(_number(float(v[idx])) for v in per_input)]
            w.writerow([*cells, _number(float(self.values[idx])), *more])
        return buf.getvalue()


def _number(v: float) -> str:
    """A CSV number: ``repr``, never ``-0.0`` (a sign that would mean something), empty
    where not finite."""
    return repr(v + 0.0) if np.isfinite(v) else ""


def _nested(values: np.ndarray) -> list:
    """JSON values: not-finite ones as null, -0.0 as 0.0 (as :func:`_number`)."""
    vals = [finite_or_none(float(v) + 0.0) for v in values.reshape(-1)]
    return np.array(vals, dtype=object).reshape(values.shape).tolist()


def axis_labels(name: str, values: Sequence[Any], inputs: Any, codec: Any) -> list[str]:
    if name in POSITION_AXES and codec is not None:
        try:
            ids = _token_ids(inputs)
            n = positions_of(inputs)
            strings = codec.token_strings(ids)
            return [f"{v} {strings[v]!r}" if isinstance(v, int) and -n <= v < n else str(v)
                    for v in values]
        except (PlanError, IndexError, TypeError):
            pass
    return [repr(v) if isinstance(v, float) else str(v) for v in values]


def _token_ids(inputs: Any) -> list[int]:
    x = inputs
    if isinstance(x, dict):
        x = x.get("input_ids", next(iter(x.values()), None))
    if isinstance(x, (tuple, list)) and x:
        x = x[0]
    return [int(i) for i in torch.as_tensor(x).reshape(-1, torch.as_tensor(x).shape[-1])[0]]


def verify_count(verify: Any, estimate: bool) -> int:
    if isinstance(verify, bool) or not isinstance(verify, int) or verify < 0:
        raise PlanError(f"verify={verify!r}: give a number of cells to run for real (0 or more)")
    if verify and not estimate:
        raise PlanError("verify runs the cells an estimate ranks first: add estimate=True "
                        "(--estimate), or drop verify and run every cell")
    return verify


def with_estimates(res: SweepResult, est: np.ndarray, got: Sequence[CellValue]) -> None:
    """Put the estimates (normalised as the values are) and the verified cells on ``res``."""
    if res.normalised is not None:
        est = normalised(est, res.normalised["clean"], res.normalised["source"])
    res.estimates = np.array(est, dtype=float)
    cells = [tuple(int(i) for i in c.index) for c in got]
    e = [float(res.estimates[c]) for c in cells]
    v = [float(res.values[c]) for c in cells]
    res.verified = {"cells": [list(c) for c in cells], "estimates": [finite_or_none(x) for x in e],
                    "values": [finite_or_none(x) for x in v], "spearman": spearman(e, v)}


def normal_ends(ctx: SweepContext) -> tuple[float, float]:
    """``(m_clean, m_source)``: the metric on the clean (baseline) run and on the source run,
    the two ends :func:`sweep` normalises between."""
    keys = {lp.intervention.source_key() for layers in ctx.resolved for lp in layers.values()
            if lp.intervention is not None and lp.intervention.pre_pass_input() is not None}
    if len(keys) != 1:
        raise PlanError("normalise needs exactly one source input among the cells (a patch's, "
                        f"--source-input); this sweep has {len(keys) or 'none'}: drop --normalise "
                        "or patch from one input")
    key = next(iter(keys))
    if ctx.shared is None or key not in ctx.source_outputs:
        raise PlanError("normalise needs the shared source run, which this model does not get "
                        "(its kernels follow its hooks, so each set of hooked layers runs its "
                        "own); drop --normalise")
    base = ctx.shared.output
    src = ctx.source_outputs[key]
    met = ctx.metric
    if met.clean is not None:
        return met.clean(base), met.clean(src)
    return met.cell(base, base), met.cell(base, src)


def sweep_result(ctx: SweepContext, got: Sequence[CellValue], normalise: bool = False) -> SweepResult:
    """The :class:`SweepResult` of computed cells (see :func:`~.sweep_cells.sweep_cells`);
    cells not among ``got`` are NaN."""
    values = values_array(ctx.coords, got)
    receipts = {c.index: c.receipts for c in got}
    names = ctx.names
    module, inputs, device, codec = ctx.module, ctx.inputs, ctx.device, ctx.codec
    cells = ctx.cells

    def run_cell(c: Mapping[str, Any]) -> RunResult:
        return compare(module, inputs, cells.plan(c), device, codec=codec)

    labels = {n: axis_labels(n, ctx.coords[n], inputs, codec) for n in names}
    batched = sum(1 for c in got if c.batched)
    batch = {"cells": batched, "rows": ctx.rows if batched else 1,
             "forwards": ctx.counts["batched"], "note": ctx.batch_note}
    counts = {k: v for k, v in ctx.counts.items() if k != "batched"}
    counts["intervened"] += ctx.counts["batched"]
    raw = None
    ends = None
    if normalise:
        m_clean, m_source = normal_ends(ctx)
        ends = {"clean": m_clean, "source": m_source}
        raw = values
        values = normalised(values, m_clean, m_source)
    timings = {k: v for k, v in ctx.timings_ms.items()}
    return SweepResult(values, labels, dict(ctx.coords), ctx.metric.name, ctx.clean, receipts,
                       timings, counts, run_cell, cells.plan, batch=batch, normalised=ends,
                       raw_values=raw)
