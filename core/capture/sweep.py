"""Sweeps: one intervention template run over a grid of layers, positions, units or a
parameter's range, one number per cell.

Every cell is a :func:`~.run.compare` of the cell's plan, so its number is the one a single
comparison gives. What cells share is paid once: the baseline forward (passed to
``compare`` as ``baseline=``) and a patch's source forward (the baseline's source cache,
primed with every layer the sweep patches). Where a model chooses its kernels by which
modules carry hooks (PyTorch's Transformer layers, see :func:`~.run.inert_hooks`), a
baseline serves only cells that hook the same modules, so such a model pays one baseline
and one source forward per set of hooked layers instead.
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

from ..base.devices import resolve_device
from ..base.errors import PlanError
from ..base.meaning import OutputMeaning
from ..model.module_walk import module_walk
from ..plan.plan import LayerPlan, Plan
from .forward_state import restore, snapshot, to_device
from .receipts import Receipt
from .run import Baseline, RunResult, _run_resolved, compare, place_module, stop_points
from .source_pass import source_groups, source_outputs
from .sweep_axes import (DEFAULT_MAX_CELLS, POSITION_AXES, Spaced, axis_values, check_size, fill,
                         make_intervention, used_axes)
from .sweep_metrics import Metric, finite_or_none, make_metric

#: Modules that pick their kernels by whether a submodule carries a hook.
_HOOK_SENSITIVE = (nn.TransformerEncoderLayer, nn.TransformerDecoderLayer, nn.MultiheadAttention)


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
    #: forwards run: baselines, source passes and intervened ones
    forwards: dict[str, int] = field(default_factory=dict)
    _cell: Callable[[Mapping[str, Any]], RunResult] | None = field(default=None, repr=False)
    _plan: Callable[[Mapping[str, Any]], Plan] | None = field(default=None, repr=False)

    @property
    def cells(self) -> int:
        return int(self.values.size)

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
            raise PlanError("this sweep result was read from a file: it cannot run cells again")
        return self._cell({n: self.coords[n][i] for n, i in zip(self.axes, idx)})

    def plan_of(self, **coords: Any) -> Plan:
        """That cell's plan, its intervened layers captured (to look at the cell in full)."""
        idx = self.index(**coords)
        if self._plan is None:
            raise PlanError("this sweep result was read from a file: it has no plans")
        plan = self._plan({n: self.coords[n][i] for n, i in zip(self.axes, idx)})
        return dataclasses.replace(plan, capture=tuple(plan.interventions), keep_tensors=True)

    def to_json_dict(self) -> dict:
        vals = [finite_or_none(float(v)) for v in self.values.reshape(-1)]
        return {"axes": {k: list(v) for k, v in self.axes.items()},
                "values": np.array(vals, dtype=object).reshape(self.values.shape).tolist(),
                "metric": self.metric, "baseline": finite_or_none(self.baseline),
                "cells": self.cells, "forwards": dict(self.forwards),
                "timings_ms": {k: round(v, 3) for k, v in self.timings_ms.items()}}

    def to_csv(self) -> str:
        """One row per cell: each axis's label, then the number. A label that a spreadsheet
        would read as a formula (``=``, ``+``, ``-``, ``@`` and not a number) starts with ``'``."""
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow([*self.axes, self.metric])
        names = list(self.axes)
        for idx in itertools.product(*(range(len(self.axes[n])) for n in names)):
            v = float(self.values[idx])
            w.writerow([*(_cell_text(self.axes[n][i]) for n, i in zip(names, idx)),
                        repr(v) if np.isfinite(v) else ""])
        return buf.getvalue()


def _cell_text(label: str) -> str:
    if label[:1] in ("=", "+", "-", "@", "\t", "\r"):
        try:
            float(label)
        except ValueError:
            return "'" + label
    return label


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
        _check_used(axes, intervene)
        first = {n: v[0] for n, v in axes.items()}
        _Cells(intervene, bind).plan(first).resolve(module)
    if metric is not None:
        make_metric(metric, meaning)
    return {n: len(v) for n, v in axes.items()}


def _check_used(axes: Mapping[str, Any], intervene: Mapping[Any, Any]) -> None:
    used = used_axes(intervene)
    unused = [n for n in axes if n not in used and "*" not in used]
    if unused:
        raise PlanError(f"sweep axis {unused[0]!r} appears in no template: every cell along it "
                        f"would be the same run; name it as {{{unused[0]}}}")


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

    name = "sweep"

    def compute(self, module: nn.Module, inputs: Any, plan: Plan, device: str,
                meaning: OutputMeaning, should_stop: Any = None) -> SweepResult:
        return sweep(module, inputs, self.over, self.intervene, self.metric, meaning=meaning,
                     device=device, max_cells=self.max_cells, should_stop=should_stop,
                     progress=self.progress, bind=self.bind)


def _labels(name: str, values: Sequence[Any], inputs: Any, codec: Any) -> list[str]:
    if name in POSITION_AXES and codec is not None:
        try:
            from .sweep_axes import positions_of

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


class _Cells:
    """Cell coordinates -> the plan of that cell."""

    def __init__(self, intervene: Mapping[Any, Any], bind: Callable | None) -> None:
        if not intervene:
            raise PlanError("a sweep needs an intervention template, e.g. "
                            "{'{layer}': 'zero'} (--intervene '{layer}=zero')")
        self.intervene = dict(intervene)
        self.bind = bind

    def plan(self, coords: Mapping[str, Any]) -> Plan:
        ivs: dict[str, Any] = {}
        for path_tpl, tpl in self.intervene.items():
            if not isinstance(path_tpl, str):
                raise PlanError(f"a sweep's layer template must be a string, not {path_tpl!r}")
            path = fill(path_tpl, coords, "layer template")
            if path in ivs:
                raise PlanError(f"two templates name layer {path!r} in the cell {dict(coords)}; "
                                "a layer takes one intervention")
            ivs[path] = make_intervention(tpl, coords, path)
        if self.bind is not None:
            ivs = self.bind(ivs)
        return Plan(capture=(), keep_tensors=False, interventions=ivs)


@dataclass(frozen=True)
class CellValue:
    """One computed cell: its index (one entry per axis), its number, and what each
    intervention did (receipts by layer path)."""

    index: tuple[int, ...]
    value: float
    receipts: dict[str, Receipt]


@dataclass
class SweepContext:
    """What every cell of one sweep shares: the grid, each cell's resolved plan, the metric
    and the shared baseline forwards, made once by :func:`prepare_sweep`; a pool of workers
    each prepares one and computes its share of the cells with :func:`sweep_cells`."""

    module: nn.Module
    inputs: Any
    x: Any
    dev: torch.device
    device: str
    codec: Any
    metric: Metric
    coords: dict[str, list[Any]]
    grid: list[tuple[int, ...]]
    plans: list[Plan]
    resolved: list[dict[str, LayerPlan]]
    cells: _Cells
    should_stop: Callable[[], bool] | None = None
    shared: Baseline | None = None
    baselines: dict[frozenset[str], Baseline] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=lambda: {"baseline": 0, "source": 0,
                                                             "intervened": 0})
    #: the metric on the baseline run (``None`` until known, or for a metric of a difference)
    clean: float | None = None

    @property
    def names(self) -> list[str]:
        return list(self.coords)

    def cell_coords(self, k: int) -> dict[str, Any]:
        return {n: self.coords[n][i] for n, i in zip(self.coords, self.grid[k])}


def prepare_sweep(module: nn.Module, inputs: Any, over: Mapping[str, Any],
                  intervene: Mapping[Any, Any], metric: Any = "max-abs-diff", *,
                  codec: Any = None, meaning: OutputMeaning | None = None, device: str = "cpu",
                  max_cells: int = DEFAULT_MAX_CELLS, should_stop: Callable[[], bool] | None = None,
                  bind: Callable[[dict], dict] | None = None) -> SweepContext:
    """Check the grid, resolve every cell's plan (a bad cell fails before any forward) and
    run the shared baseline and source forwards (see the module docstring)."""
    if meaning is not None and codec is None:
        codec = meaning.codec
    if not isinstance(over, Mapping) or not over:
        raise PlanError("a sweep needs at least one axis, e.g. over={'layer': 'blocks.*'} "
                        "(--over layer=PATTERN)")
    axes = {name: axis_values(name, v, module, inputs) for name, v in over.items()}
    check_size(axes, max_cells)
    _check_used(axes, intervene)
    coords = {n: (v.values() if isinstance(v, Spaced) else list(v)) for n, v in axes.items()}
    met: Metric = make_metric(metric, meaning)
    cells = _Cells(intervene, bind)
    names = list(coords)
    grid = list(itertools.product(*(range(len(coords[n])) for n in names)))
    plans = [cells.plan({n: coords[n][i] for n, i in zip(names, idx)}) for idx in grid]
    dev = resolve_device(device)
    tree = module_walk(module)
    resolved = [p.resolve(module, tree) for p in plans]  # every bad cell fails before a forward
    place_module(module, dev)
    x = to_device(inputs, dev)
    ctx = SweepContext(module, inputs, x, dev, device, codec, met, coords, grid, plans, resolved,
                       cells, should_stop)
    if not any(isinstance(m, _HOOK_SENSITIVE) for m in module.modules()):
        # one baseline and one source forward per source input serve every cell
        ctx.shared = _make_baseline(module, x, resolved[0], dev, should_stop)
        ctx.counts["baseline"] += 1
        ctx.counts["source"] += _prime_sources(module, x, dev, codec, resolved, ctx.shared)
    return ctx


def sweep_cells(ctx: SweepContext, cells: Sequence[int] | None = None,
                progress: Callable[[int, int], None] | None = None) -> list[CellValue]:
    """Compute ``cells`` (positions in ``ctx.grid``, row-major over the axes; ``None``: all)
    and return their values in that order. ``progress(done, total)`` after each cell."""
    order = list(range(len(ctx.grid))) if cells is None else [int(k) for k in cells]
    for k in order:
        if not 0 <= k < len(ctx.grid):
            raise PlanError(f"cell {k} is outside the sweep's {len(ctx.grid)} cells")
    out = []
    for k in order:
        layers = ctx.resolved[k]
        hooked = frozenset(layers)
        base = ctx.baselines.get(hooked)
        if base is None and ctx.shared is not None:
            base = ctx.baselines[hooked] = dataclasses.replace(ctx.shared, hooked=hooked)
        primed = base is not None and _sources_cached(layers, base)
        res = compare(ctx.module, ctx.x, ctx.plans[k], ctx.device, baseline=base,
                      should_stop=ctx.should_stop, codec=ctx.codec)
        ctx.counts["intervened"] += 1
        if not res.baseline_reused:
            ctx.counts["baseline"] += 1
        if "source" in res.timings_ms and not primed:
            ctx.counts["source"] += len(source_groups(layers, ctx.x, ctx.dev, ctx.codec))
        if base is None and res.baseline is not None:
            ctx.baselines[hooked] = res.baseline
        if k == 0 and ctx.metric.clean is not None:  # the metric on the first cell's baseline
            ctx.clean = ctx.metric.clean(res.output_without)
        out.append(CellValue(ctx.grid[k], ctx.metric.cell(res.output_without, res.output_with),
                             res.receipts))
        if progress is not None:
            progress(len(out), len(order))
    return out


def sweep(module: nn.Module, inputs: Any, over: Mapping[str, Any],
          intervene: Mapping[Any, Any], metric: Any = "max-abs-diff", *, codec: Any = None,
          meaning: OutputMeaning | None = None, device: str = "cpu",
          max_cells: int = DEFAULT_MAX_CELLS, should_stop: Callable[[], bool] | None = None,
          progress: Callable[[int, int], None] | None = None,
          bind: Callable[[dict], dict] | None = None) -> SweepResult:
    """Run ``intervene`` at every cell of the grid ``over`` spans; one ``metric`` number each.

    ``over``: ``{axis: values}``, e.g. ``{"layer": "blocks.*", "pos": "all"}`` or
    ``{"alpha": "linspace(0,8,5)"}`` (see :mod:`.sweep_axes`). ``intervene``:
    ``{path template: intervention template}``, e.g. ``{"{layer}": "patch:text:...@pos={pos}"}``,
    ``{"fc1": "zero@units={unit}"}``, or a function of the coordinates returning an
    intervention. ``metric``: see :mod:`.sweep_metrics`. ``codec``/``meaning``: the model's
    tokenizer and output meaning (``load_model(...).meaning``). ``bind``: applied to each
    cell's ``{path: intervention}`` (the CLI binds ``--vector`` names with it).
    ``progress(done, total)`` after each cell; ``should_stop`` as in :func:`compare`.
    A grid over ``max_cells`` cells is refused before anything runs.
    """
    t0 = time.perf_counter()
    ctx = prepare_sweep(module, inputs, over, intervene, metric, codec=codec, meaning=meaning,
                        device=device, max_cells=max_cells, should_stop=should_stop, bind=bind)
    done = sweep_cells(ctx, None, progress)
    codec = ctx.codec
    cells = ctx.cells

    def run_cell(c: Mapping[str, Any]) -> RunResult:
        return compare(module, inputs, cells.plan(c), device, codec=codec)

    labels = {n: _labels(n, v, inputs, codec) for n, v in ctx.coords.items()}
    return SweepResult(values_array(ctx.coords, done), labels, ctx.coords, ctx.metric.name,
                       ctx.clean, {c.index: c.receipts for c in done},
                       {"total": (time.perf_counter() - t0) * 1e3}, dict(ctx.counts), run_cell,
                       cells.plan)


def values_array(coords: Mapping[str, Sequence[Any]], done: Sequence[CellValue]) -> np.ndarray:
    """The cells' numbers as an array shaped by the axes (NaN where a cell is missing)."""
    values = np.full(tuple(len(v) for v in coords.values()), np.nan)
    for c in done:
        values[c.index] = c.value
    return values


def _sources_cached(layers: dict[str, LayerPlan], base: Baseline) -> bool:
    """Whether ``base``'s source cache already holds every output these layers patch in."""
    for path, lp in layers.items():
        iv = lp.intervention
        if iv is None or iv.pre_pass_input() is None:
            continue
        if path not in base.sources.get(iv.source_key(), {}):
            return False
    return True


def _prime_sources(module: nn.Module, x: Any, dev: torch.device, codec: Any,
                   cells: list[dict[str, LayerPlan]], base: Baseline) -> int:
    """Record, in one forward per source input, what every cell patches in (a
    model whose kernels do not depend on hooks: see the module docstring). Returns the
    number of forwards run."""
    union: dict[str, LayerPlan] = {}
    for layers in cells:
        for path, lp in layers.items():
            iv = lp.intervention
            if iv is not None and iv.pre_pass_input() is not None and lp.head_site is None:
                union.setdefault(path, lp)
    if not union:
        return 0
    groups = source_groups(union, x, dev, codec)
    start = snapshot(module)
    try:
        source_outputs(module, union, groups, cache=base.sources)
    finally:
        restore(module, start)
    return len(groups)


def _make_baseline(module: nn.Module, x: Any, layers: dict[str, LayerPlan], dev: torch.device,
                   should_stop: Callable[[], bool] | None) -> Baseline:
    """The baseline forward :func:`compare` would run for a plan hooking ``layers`` (no
    captures, inert hooks on the hooked modules), for cells to share."""
    clean = {p: LayerPlan(p, lp.module) for p, lp in layers.items()}
    start = snapshot(module)
    try:
        with stop_points(module, should_stop):
            b = _run_resolved(module, x, clean, False, dev, start=start)
    finally:
        restore(module, start)
    return Baseline(b.output, b.forward_ms, str(dev), frozenset(layers), should_stop is not None,
                    captures=b.captures, captured=frozenset(), keep_tensors=False)
