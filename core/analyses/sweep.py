"""Sweeps: one intervention template run over a grid of layers, positions, units or a
parameter's range, one number per cell.

Every cell stands for a :func:`~.run.compare` of the cell's plan. What cells share is paid
once: the baseline forward (passed to ``compare`` as ``baseline=``) and a patch's source
forward (the baseline's source cache, primed with every layer the sweep patches). Where a
model chooses its kernels by which modules carry hooks (PyTorch's Transformer layers, see
:func:`~.run.inert_hooks`), a baseline serves only cells that hook the same modules, so such
a model pays one baseline and one source forward per set of hooked layers instead.

Cells run as rows of one batched forward where the model allows (:mod:`.sweep_batch`), equal
to their single comparison up to a batched matrix product's rounding; with ``batch=False``
each cell is its comparison, bit for bit. :mod:`.sweep_cells` holds the shared set-up and
computes any subset of cells (for a pool of workers); this module is the whole sweep, its
result and the request the session's runner computes.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import itertools
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

import numpy as np
import torch
from torch import nn

from ..base.user_text import spreadsheet_cell as _cell_text
from ..base.errors import HookscopeError, PlanError
from ..base.meaning import OutputMeaning
from ..plan.plan import Plan
from ..plan.intervention_registry import parse_intervention
from ..engine.receipts import Receipt
from ..engine.run import RunResult, compare
from .sweep_axes import (DEFAULT_MAX_CELLS, POSITION_AXES, axis_values, check_size, fill,
                         placeholders)
from .sweep_batch import DEFAULT_BATCH_BYTES
from .sweep_cells import (Cells, CellValue, SweepContext, check_used, prepare_sweep, sweep_cells,
                          values_array)
from .sweep_metrics import NoScores, finite_or_none, make_metric, normalised
from .sweep_axes import positions_of
from .sweep_estimate import (NOT_DIFFERENTIABLE, EstimateRefused, check_estimable, estimate_cells,
                             spearman, verify_cells)

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
    #: forwards run: baselines, source passes and intervened ones (a batched forward is one)
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


def sweep_size(module: nn.Module, inputs: Any, over: Mapping[str, Any],
               max_cells: int = DEFAULT_MAX_CELLS, intervene: Mapping[Any, Any] | None = None,
               metric: Any = None, meaning: OutputMeaning | None = None,
               bind: Callable[[dict], dict] | None = None) -> dict[str, int]:
    """``{axis: number of values}`` of a grid, refused as :func:`sweep` would refuse it
    (nothing runs): for stating the number of runs before starting. With ``intervene``
    (and ``metric``), the templates and the first cell's plan are checked too."""
    if not isinstance(over, Mapping) or not over:
        raise PlanError("a sweep needs at least one axis, e.g. over={'layer': 'blocks.*'} "
                        "(--over layer=PATTERN)")
    axes = {name: axis_values(name, v, module, inputs) for name, v in over.items()}
    check_size(axes, max_cells)
    if intervene is not None:
        check_used(axes, intervene)
        first = {n: v[0] for n, v in axes.items()}
        Cells(intervene, bind).plan(first).resolve(module)
    if metric is not None:
        make_metric(metric, meaning)
    return {n: len(v) for n, v in axes.items()}


def template_plan(module: nn.Module, inputs: Any, over: Mapping[str, Any],
                  intervene: Mapping[Any, Any], max_cells: int = DEFAULT_MAX_CELLS) -> Plan:
    """The first cell's plan as its templates write it, before any binding: its sources
    (``patch:src.npy``) are files a sweep reads, to declare before anything runs (nothing
    runs here; a grid over ``max_cells`` is refused first, as :func:`sweep_size` does)."""
    axes = {name: axis_values(name, v, module, inputs) for name, v in over.items()}
    check_size(axes, max_cells)
    return Cells(intervene, None).plan({n: v[0] for n, v in axes.items()})


#: The most filled-in templates :func:`template_sources` reads for their files.
MAX_SOURCE_TEMPLATES = 10_000


def template_sources(over: Mapping[str, Any], intervene: Mapping[Any, Any]) -> list[str]:
    """The files the templates' interventions read in any cell (``patch:src.npy``,
    ``patch:{s}`` over an axis of file names), found without the model, so that a sweep
    can refuse an output over one of them before anything runs, here or on a Ray pool
    where the model is elsewhere. Each string template is filled with every combination of
    the axes it names whose values are read without the model (lists, ranges), up to
    :data:`MAX_SOURCE_TEMPLATES`; a layer pattern or ``all`` needs the model and names a
    layer or a position, never a file, so a template naming one is left to the cells."""
    axes: dict[str, Sequence] = {}
    for name, value in over.items():
        try:
            axes[name] = axis_values(name, value, None, None)  # type: ignore[arg-type]
        except (HookscopeError, AttributeError, TypeError):  # needs the model or its input
            continue
    found: set[str] = set()
    for tpl in intervene.values():
        if not isinstance(tpl, str):
            continue
        names = sorted(placeholders(tpl))
        if any(n not in axes for n in names) or \
                np.prod([len(axes[n]) for n in names], dtype=float) > MAX_SOURCE_TEMPLATES:
            continue
        for combo in itertools.product(*(axes[n] for n in names)):
            try:
                source = parse_intervention(fill(tpl, dict(zip(names, combo)), "template"))\
                    .pre_pass_input()
            except HookscopeError:  # a malformed cell: refused with its reason where it runs
                continue
            if isinstance(source, str) and source.strip():
                found.add(source)
    return sorted(found)


@dataclass(frozen=True, eq=False)
class SweepRequest:
    """A sweep as a view the session's runner computes after a run (off the GUI thread),
    on the run's model, input and device; see :func:`sweep` for the fields. ``progress``
    is called on the runner's thread."""

    over: Mapping[str, Any]
    intervene: Mapping[Any, Any]
    metric: Any = "max-abs-diff"
    max_cells: int = DEFAULT_MAX_CELLS
    progress: Callable[[int, int], None] | None = None
    bind: Callable[[dict], dict] | None = None
    partial: Callable[[SweepResult], None] | None = None
    batch: bool | int = True
    normalise: bool = False
    estimate: bool = False
    verify: int = 0
    #: many inputs instead of the run's (each a batch of one, as the model takes it), and
    #: their names: each cell the mean over them (see :mod:`.sweep_inputs`)
    input_set: Sequence[Any] | None = None
    input_names: Sequence[str] | None = None

    name = "sweep"

    def compute(self, module: nn.Module, inputs: Any, plan: Plan, device: str,
                meaning: OutputMeaning, should_stop: Any = None) -> SweepResult:
        return sweep(module, inputs, self.over, self.intervene, self.metric, meaning=meaning,
                     device=device, max_cells=self.max_cells, should_stop=should_stop,
                     progress=self.progress, bind=self.bind, batch=self.batch,
                     normalise=self.normalise, partial=self.partial, estimate=self.estimate,
                     verify=self.verify, input_set=self.input_set, input_names=self.input_names)


def _labels(name: str, values: Sequence[Any], inputs: Any, codec: Any) -> list[str]:
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


def sweep(module: nn.Module, inputs: Any, over: Mapping[str, Any],
          intervene: Mapping[Any, Any], metric: Any = "max-abs-diff", *, codec: Any = None,
          meaning: OutputMeaning | None = None, device: str = "cpu",
          max_cells: int = DEFAULT_MAX_CELLS, should_stop: Callable[[], bool] | None = None,
          progress: Callable[[int, int], None] | None = None,
          bind: Callable[[dict], dict] | None = None, batch: bool | int = True,
          batch_bytes: int = DEFAULT_BATCH_BYTES, normalise: bool = False,
          partial: Callable[[SweepResult], None] | None = None, estimate: bool = False,
          verify: int = 0, estimate_budget: int | None = None,
          input_set: Sequence[Any] | None = None,
          input_names: Sequence[str] | None = None) -> SweepResult:
    """Run ``intervene`` at every cell of the grid ``over`` spans; one ``metric`` number each.

    ``over``: ``{axis: values}``, e.g. ``{"layer": "blocks.*", "pos": "all"}`` or
    ``{"alpha": "linspace(0,8,5)"}`` (see :mod:`.sweep_axes`). ``intervene``:
    ``{path template: intervention template}``, e.g. ``{"{layer}": "patch:text:...@pos={pos}"}``,
    ``{"fc1": "zero@units={unit}"}``, or a function of the coordinates returning an
    intervention. ``metric``: see :mod:`.sweep_metrics`. ``codec``/``meaning``: the model's
    tokenizer and output meaning (``load_model(...).meaning``). ``bind``: applied to each
    cell's ``{path: intervention}`` (the CLI binds ``--vector`` names with it).
    ``progress(done, total)`` after each cell; ``partial(result)`` too, with the grid so far
    (a copy; cells not run yet are NaN), for a view that fills in as cells arrive;
    ``should_stop`` as in :func:`compare`.
    A grid over ``max_cells`` cells is refused before anything runs.

    ``batch``: cells run as rows of one forward where the model allows (see
    :mod:`.sweep_batch`; ``True``: up to 32 rows, a number: at most that many, ``False``: each
    cell its own comparison, equal to it bit for bit); ``batch_bytes``: the memory budget of a
    batch. :attr:`SweepResult.batch` says what happened and why. ``normalise``: each value
    as ``(m - m_clean) / (m_source - m_clean)``, 0 for the clean run and 1 for the source run
    (the patching papers' normalisation; needs one source input among the cells).

    ``estimate``: instead of running every cell, estimate each to first order from one
    forward and one backward (:mod:`.sweep_estimate`; :attr:`SweepResult.estimates`), then
    run for real only the ``verify`` cells whose estimate moves furthest from the clean
    run (:attr:`SweepResult.verified`; :attr:`~SweepResult.values` holds those, NaN
    elsewhere). ``estimate_budget``: the bytes the forward with gradients may keep
    (default: half the free memory).

    ``input_set``: many inputs (each as ``inputs`` would be; ``inputs`` is then ignored):
    each cell is the mean over them, with :attr:`SweepResult.spread` and
    :attr:`SweepResult.per_input` (:mod:`.sweep_inputs`; ``input_names`` name them).
    """
    if input_set is not None:
        from .sweep_inputs import sweep_over_inputs

        if partial is not None:
            raise PlanError("a sweep over an input set gives its grid when done: drop partial")
        return sweep_over_inputs(module, input_set, over, intervene, metric, names=input_names,
                                 codec=codec, meaning=meaning, device=device,
                                 max_cells=max_cells, should_stop=should_stop,
                                 progress=progress, bind=bind, batch=batch,
                                 batch_bytes=batch_bytes, normalise=normalise,
                                 estimate=estimate, verify=verify,
                                 estimate_budget=estimate_budget)
    t0 = time.perf_counter()
    verify = _verify_count(verify, estimate)
    if estimate:  # a metric or mode the estimate refuses is said before any forward
        check_estimable(module, metric, meaning)
    try:
        ctx = prepare_sweep(module, inputs, over, intervene, metric, codec=codec, meaning=meaning,
                            device=device, max_cells=max_cells, should_stop=should_stop,
                            bind=bind, batch=batch, batch_bytes=batch_bytes, measure=estimate)
    except NoScores as exc:
        if not estimate:
            raise
        raise EstimateRefused(NOT_DIFFERENTIABLE) from exc
    if normalise:
        normal_ends(ctx)  # refused before the cells run
    est = None
    if estimate:
        est = estimate_cells(ctx, estimate_budget)

    def result(so_far: Sequence[CellValue], normal: bool = False) -> SweepResult:
        res = sweep_result(ctx, so_far, normalise=normal)
        if est is not None:
            _with_estimates(res, est.values, so_far)
        return res

    def grid_so_far(so_far: list[CellValue]) -> None:
        assert partial is not None
        partial(result(so_far))   # a new array each time: the caller may keep it

    arrived = grid_so_far if partial is not None else None
    if est is not None:
        if partial is not None:
            partial(result([]))  # the estimates at once, before any cell runs
        got = verify_cells(ctx, est, verify, progress=progress, arrived=arrived)
    else:
        got = sweep_cells(ctx, progress=progress, arrived=arrived)
    res = result(got, normalise)
    res.timings_ms["total"] = (time.perf_counter() - t0) * 1e3
    return res


def _verify_count(verify: Any, estimate: bool) -> int:
    if isinstance(verify, bool) or not isinstance(verify, int) or verify < 0:
        raise PlanError(f"verify={verify!r}: give a number of cells to run for real (0 or more)")
    if verify and not estimate:
        raise PlanError("verify runs the cells an estimate ranks first: add estimate=True "
                        "(--estimate), or drop verify and run every cell")
    return verify


def _with_estimates(res: SweepResult, est: np.ndarray, got: Sequence[CellValue]) -> None:
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

    labels = {n: _labels(n, ctx.coords[n], inputs, codec) for n in names}
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
