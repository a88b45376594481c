"""Computing a sweep's cells: what they share, set up once, and any subset of them.

:func:`prepare_sweep` builds a :class:`SweepContext`: the grid, each cell's resolved plan, the
metric, the shared baseline forward and the source forward of every patch input (one each,
see :mod:`.sweep`), and whether and how many cells a batched forward takes
(:mod:`.sweep_batch`). :func:`sweep_cells` then computes any list of cells of it, in any
order, as :class:`CellValue` (the cell's index, its number, its receipts), so a pool of
workers can each prepare once and compute their share; :func:`~.sweep.sweep` computes all.

A cell is computed either by :func:`~.run.compare` with the shared baseline (exactly the
single comparison it stands for), or as one row of a batched forward, equal to it up to the
rounding of a batched matrix product.
"""

from __future__ import annotations

import dataclasses
import itertools
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

import numpy as np
import torch
from torch import nn

from ..base.devices import resolve_device
from ..base.errors import Cancelled, HookscopeError, PlanError
from ..base.meaning import OutputMeaning
from ..model.module_walk import module_walk
from ..plan.plan import LayerPlan, Plan
from ..engine.forward_state import forward, restore, snapshot, to_device
from ..engine.output_diff import output_change
from ..engine.receipts import Receipt, Tally, receipts_for
from ..engine.run import Baseline, compare, place_module, stop_points
from ..engine.source_pass import source_groups, source_outputs
from .sweep_axes import Spaced, axis_values, check_size, fill, make_intervention, used_axes
from .sweep_batch import (DEFAULT_BATCH_BYTES, DEFAULT_MAX_ROWS, NotRowwise, RowHooks, RowWork,
                          leaf_bytes, output_rows, repeat_rows, row_outputs, rows_for_budget,
                          stack_rows,
                          rows_match, why_not_batched)
from .sweep_baseline import make_baseline
from .sweep_metrics import Metric, make_metric
from ..engine.source_pass import _slot

#: Modules that pick their kernels by whether a submodule carries a hook.
HOOK_SENSITIVE = (nn.TransformerEncoderLayer, nn.TransformerDecoderLayer, nn.MultiheadAttention)


@dataclass(frozen=True)
class CellValue:
    """One computed cell: its index (one entry per axis), its number, what each intervention
    did (receipts by layer path), and whether it ran as a row of a batched forward."""

    index: tuple[int, ...]
    value: float
    receipts: dict[str, Receipt]
    batched: bool = False


class Cells:
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


def check_used(axes: Mapping[str, Any], intervene: Mapping[Any, Any]) -> None:
    used = used_axes(intervene)
    unused = [n for n in axes if n not in used and "*" not in used]
    if unused:
        raise PlanError(f"sweep axis {unused[0]!r} appears in no template: every cell along it "
                        f"would be the same run; name it as {{{unused[0]}}}")


@dataclass
class SweepContext:
    """What every cell of one sweep shares (see the module docstring)."""

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
    cells: Cells
    should_stop: Callable[[], bool] | None = None
    shared: Baseline | None = None
    baselines: dict[frozenset[str], Baseline] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=lambda: {"baseline": 0, "source": 0,
                                                             "intervened": 0, "batched": 0})
    #: the metric on the baseline run (``None`` until known, or for a metric of a difference)
    clean: float | None = None
    #: rows one batched forward takes (1: cells run one by one)
    rows: int = 1
    #: why cells run one by one (or stopped being batched), in words; ``None`` if they did not
    batch_note: str | None = None
    #: the first batch carries a clean row checked against the baseline; done once
    rows_checked: bool = False
    #: (id of a hooked module, at a head projection) -> its leaves' shapes per call, alone
    leaf_shapes: dict[tuple[int, bool], list[dict[str, tuple[int, ...]]]] = field(
        default_factory=dict)
    #: source input key -> the model's output on it (from the shared source forward)
    source_outputs: dict[Any, Any] = field(default_factory=dict)
    timings_ms: dict[str, float] = field(default_factory=dict)
    #: the bytes of every leaf module's output in the baseline forward (what a forward with
    #: gradients keeps for its backward, roughly), when asked for (``measure=True``)
    activation_bytes: int | None = None
    #: what one row of a batched forward takes, as the batch budget estimates it (0: unknown)
    row_bytes: int = 0

    @property
    def names(self) -> list[str]:
        return list(self.coords)

    def cell_coords(self, k: int) -> dict[str, Any]:
        return {n: self.coords[n][i] for n, i in zip(self.coords, self.grid[k])}


def prepare_sweep(module: nn.Module, inputs: Any, over: Mapping[str, Any],
                  intervene: Mapping[Any, Any], metric: Any = "max-abs-diff", *,
                  codec: Any = None, meaning: OutputMeaning | None = None, device: str = "cpu",
                  max_cells: int = 10_000, should_stop: Callable[[], bool] | None = None,
                  bind: Callable[[dict], dict] | None = None, batch: bool | int = True,
                  batch_bytes: int = DEFAULT_BATCH_BYTES, measure: bool = False,
                  like: tuple[SweepContext, Any] | None = None,
                  shared_forward: Callable[[SweepContext], tuple[Any, float]] | None = None
                  ) -> SweepContext:
    """Check the grid, resolve every cell's plan (a bad cell fails before any forward), run
    the shared baseline and source forwards, and decide the batching. ``batch``: ``True``
    (batch where the model allows, up to :data:`~.sweep_batch.DEFAULT_MAX_ROWS` rows),
    a number of rows, or ``False``/``1`` (every cell a single comparison); ``batch_bytes``:
    the memory a batch's rows may take (estimated from the baseline's largest activation).
    ``measure``: note the baseline's activation bytes (:attr:`SweepContext.activation_bytes`)
    even where cells are not batched. ``like``: ``(context, output)``, another input's
    context of the same sweep and model whose input has this one's shapes, and the model's
    output on this input: its baseline stands in for this one's baseline forward (the leaf
    shapes, sizes and source cache are that context's; see :mod:`.sweep_inputs`).
    ``shared_forward``: a forward of this input that stands in for the shared baseline's
    where there is one (an estimate's forward with gradients, see :mod:`.sweep_estimate`):
    called with the context, it returns the output (detached, on the CPU) and its
    milliseconds, and counts itself; the baseline's notes (leaf sizes and shapes) are taken
    during it. Where the model gets no shared baseline it is not called."""
    t0 = time.perf_counter()
    if meaning is not None and codec is None:
        codec = meaning.codec
    if not isinstance(over, Mapping) or not over:
        raise PlanError("a sweep needs at least one axis, e.g. over={'layer': 'blocks.*'} "
                        "(--over layer=PATTERN)")
    axes = {name: axis_values(name, v, module, inputs) for name, v in over.items()}
    check_size(axes, max_cells)
    check_used(axes, intervene)
    max_rows = _max_rows(batch)
    coords = {n: (v.values() if isinstance(v, Spaced) else list(v)) for n, v in axes.items()}
    met = make_metric(metric, meaning)
    cells = Cells(intervene, bind)
    names = list(coords)
    grid = list(itertools.product(*(range(len(coords[n])) for n in names)))
    plans = [cells.plan({n: coords[n][i] for n, i in zip(names, idx)}) for idx in grid]
    dev = resolve_device(device)
    tree = module_walk(module)
    resolved = [p.resolve(module, tree) for p in plans]  # every bad cell fails before a forward
    place_module(module, dev)
    x = to_device(inputs, dev)
    sensitive = any(isinstance(m, HOOK_SENSITIVE) for m in module.modules())
    ctx = SweepContext(module, inputs, x, dev, device, codec, met, coords, grid, plans, resolved,
                       cells, should_stop)
    note = why_not_batched(module, x, sensitive) if max_rows > 1 else (
        "batching was switched off (batch=False, --batch 1)")
    if not sensitive:  # one baseline and one source forward per source input serve every cell
        largest: list[int] = []
        if like is not None and like[0].shared is not None:
            other, output = like
            assert other.shared is not None
            ctx.shared = dataclasses.replace(other.shared, output=output)
            ctx.leaf_shapes = other.leaf_shapes
            ctx.activation_bytes = other.activation_bytes
            ctx.source_outputs = other.source_outputs
            largest = [other.row_bytes]  # what a row takes, as that input's baseline said
        else:
            run = (lambda: shared_forward(ctx)) if shared_forward is not None else None
            ctx.shared = make_baseline(module, x, resolved, dev, should_stop,
                                       largest if note is None or measure else None,
                                       ctx.leaf_shapes, run)
            ctx.activation_bytes = sum(largest) if largest else None
            ctx.counts["baseline"] += 1 if run is None else 0
            ctx.counts["source"] += _prime_sources(ctx)
        if met.clean is not None:
            ctx.clean = met.clean(ctx.shared.output)
        if note is None:
            note = output_rows(ctx.shared.output)
        if note is None:
            row_bytes = ctx.row_bytes = (largest[0] if like is not None else
                                         3 * max(largest, default=0)
                                         + 2 * leaf_bytes(ctx.shared.output))
            ctx.rows = min(rows_for_budget(row_bytes, max_rows, batch_bytes), len(grid) + 1)
            if ctx.rows < 2:
                note = (f"one row takes about {row_bytes / 2**20:.0f} MiB, so a batch of two "
                        f"does not fit the {batch_bytes / 2**20:.0f} MiB batch budget")
    ctx.batch_note = note if ctx.rows < 2 else None
    ctx.timings_ms["prepare"] = (time.perf_counter() - t0) * 1e3
    return ctx


def _max_rows(batch: bool | int) -> int:
    if batch is True:
        return DEFAULT_MAX_ROWS
    if batch is False or batch is None:
        return 1
    if isinstance(batch, int) and batch >= 1:
        return batch
    raise PlanError(f"batch={batch!r}: give True, False or a number of rows (at least 1)")


def batchable(ctx: SweepContext, k: int) -> bool:
    """Whether cell ``k`` can be a row of a batched forward: every one of its interventions
    acts at its layer's output or at an output projection's input (not an
    nn.MultiheadAttention's heads, computed again inside its hook), and says it may."""
    if ctx.rows < 2:
        return False
    for lp in ctx.resolved[k].values():
        iv = lp.intervention
        if iv is None or not iv.batch_rows or lp.mid_block is not None:
            return False
        if lp.head_site is not None and lp.head_site.recompute:
            return False
    return True


def sweep_cells(ctx: SweepContext, cells: Sequence[int] | None = None,
                progress: Callable[[int, int], None] | None = None,
                arrived: Callable[[list[CellValue]], None] | None = None) -> list[CellValue]:
    """Compute ``cells`` (positions in ``ctx.grid``, row-major over the axes; ``None``: all)
    and return their values in that order. ``progress(done, total)`` after each cell;
    ``arrived(values)`` too, with every cell computed so far (in the order they came)."""
    order = list(range(len(ctx.grid))) if cells is None else [int(k) for k in cells]
    for k in order:
        if not 0 <= k < len(ctx.grid):
            raise PlanError(f"cell {k} is outside the sweep's {len(ctx.grid)} cells")
    t0 = time.perf_counter()
    out: dict[int, CellValue] = {}
    total = len(order)
    chunk: list[int] = []

    def done(values: list[CellValue], ks: list[int]) -> None:
        for k, v in zip(ks, values):
            out[k] = v
            if progress is not None:
                progress(len(out), total)
            if arrived is not None:
                arrived(list(out.values()))

    for k in order:
        if batchable(ctx, k):
            chunk.append(k)
            if len(chunk) >= ctx.rows - (0 if ctx.rows_checked else 1):
                done(_batch_or_single(ctx, chunk), chunk)
                chunk = []
        else:
            done([_single(ctx, k)], [k])
    if chunk:
        done(_batch_or_single(ctx, chunk), chunk)
    ctx.timings_ms["cells"] = ctx.timings_ms.get("cells", 0.0) + (time.perf_counter() - t0) * 1e3
    return [out[k] for k in order]


def _single(ctx: SweepContext, k: int) -> CellValue:
    """Cell ``k`` as its own comparison, with the shared baseline and source outputs."""
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
    if ctx.clean is None and ctx.metric.clean is not None:
        ctx.clean = ctx.metric.clean(res.output_without)
    value = ctx.metric.cell(res.output_without, res.output_with)
    return CellValue(ctx.grid[k], value, res.receipts)


def _batch_or_single(ctx: SweepContext, chunk: list[int]) -> list[CellValue]:
    """The cells of ``chunk`` as rows of one forward; one by one where that cannot stand for
    them (then batching stops for the rest of the sweep, and :attr:`SweepContext.batch_note`
    says why)."""
    try:
        return _batch(ctx, chunk)
    except Cancelled:
        raise
    except NotRowwise as exc:
        ctx.rows, ctx.batch_note = 1, f"{exc}; the cells ran one by one"
    except (HookscopeError, RuntimeError) as exc:
        # A cell's own error comes again, as its own comparison raises it, just below.
        values = [_single(ctx, k) for k in chunk]
        ctx.rows = 1
        ctx.batch_note = (f"a batched forward of {len(chunk)} cells failed "
                          f"({type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}); "
                          "the cells ran one by one")
        return values
    return [_single(ctx, k) for k in chunk]


def _batch(ctx: SweepContext, chunk: list[int]) -> list[CellValue]:
    check = not ctx.rows_checked
    values = batch_rows([(ctx, k) for k in chunk], ctx if check else None)
    if check:
        ctx.rows_checked = True
    return values


def batch_rows(rows: list[tuple[SweepContext, int]],
               clean: SweepContext | None = None) -> list[CellValue]:
    """Cells as rows of one forward: ``rows`` are ``(context, cell)`` pairs, each row the
    context's input with that cell's interventions (contexts of one model whose inputs share
    their shapes: a sweep's own cells, or one cell on several inputs). ``clean``: a context
    whose clean input goes in a last row, checked against its baseline
    (:class:`~.sweep_batch.NotRowwise` where it differs)."""
    first = rows[0][0] if rows else clean
    assert first is not None
    k = len(rows) + (1 if clean is not None else 0)
    hooks = RowHooks(k, first.leaf_shapes)
    tallies: list[dict[str, Tally]] = []
    for r, (ctx, cell) in enumerate(rows):
        layers = ctx.resolved[cell]
        sources = _cell_sources(ctx, cell)
        mine: dict[str, Tally] = {}
        for path, lp in layers.items():
            iv = lp.intervention
            assert iv is not None  # see batchable
            mine[path] = Tally()
            site = lp.head_site
            hooks.add(lp, RowWork(r, path, iv, sources.get(path), mine[path],
                                  site.n_heads if site is not None else None))
        tallies.append(mine)
    parts = [(ctx, 1) for ctx, _ in rows] + ([(clean, 1)] if clean is not None else [])
    xk = _row_inputs(parts)
    module = first.module
    start = snapshot(module)
    try:
        with stop_points(module, first.should_stop), hooks:
            out = forward(module, xk, torch.inference_mode)
    finally:
        restore(module, start)
    for ctx, _ in parts:
        assert ctx.shared is not None  # batching is only decided with a shared baseline
    assert first.shared is not None
    outs = row_outputs(out, first.shared.output, k)
    if clean is not None:
        assert clean.shared is not None
        if not rows_match(outs[-1], clean.shared.output):
            raise NotRowwise("the model's rows are not independent (a batch's clean row "
                             "differs from the single run)")
    first.counts["batched"] += 1
    values = []
    for r, (ctx, cell) in enumerate(rows):
        assert ctx.shared is not None
        base = ctx.shared.output
        row = outs[r]
        differ, max_diff, rel = output_change(base, row)
        described = {p: lp.intervention.describe() for p, lp in ctx.resolved[cell].items()
                     if lp.intervention is not None}
        receipts = receipts_for(tallies[r], described, differ, max_diff, rel)
        values.append(CellValue(ctx.grid[cell], ctx.metric.cell(base, row), receipts,
                                batched=True))
    return values


def _row_inputs(parts: list[tuple[SweepContext, int]]) -> Any:
    """The batched forward's input: each context's input (a batch of one) once per row, in
    order. Where every row has the same input, it is repeated (the sweep's own cells)."""
    if all(ctx is parts[0][0] for ctx, _ in parts):
        return repeat_rows(parts[0][0].x, len(parts))
    return stack_rows([ctx.x for ctx, _ in parts])


def _cell_sources(ctx: SweepContext, k: int) -> dict[str, list[Any]]:
    """``{path: source outputs per call}`` of cell ``k``'s patches, from the shared cache
    (a source forward only for what it does not hold yet)."""
    layers = ctx.resolved[k]
    need = {p: lp for p, lp in layers.items()
            if lp.intervention is not None and lp.intervention.pre_pass_input() is not None}
    if not need:
        return {}
    assert ctx.shared is not None
    cached = _sources_cached(need, ctx.shared)
    groups = source_groups(need, ctx.x, ctx.dev, ctx.codec)
    start = snapshot(ctx.module)
    try:
        got = source_outputs(ctx.module, need, groups, cache=ctx.shared.sources)
    finally:
        restore(ctx.module, start)
    if not cached:
        ctx.counts["source"] += len(groups)
    return got


def _sources_cached(layers: dict[str, LayerPlan], base: Baseline) -> bool:
    """Whether ``base``'s source cache already holds every output these layers patch in."""
    for path, lp in layers.items():
        iv = lp.intervention
        if iv is None or iv.pre_pass_input() is None:
            continue
        if _slot(path, lp) not in base.sources.get(iv.source_key(), {}):
            return False
    return True


def _prime_sources(ctx: SweepContext) -> int:
    """Record, in one forward per source input, what every cell patches in, and the model's
    output on it (a model whose kernels do not depend on hooks: see :mod:`.sweep`). Returns
    the number of forwards run."""
    assert ctx.shared is not None
    union: dict[str, LayerPlan] = {}
    for layers in ctx.resolved:
        for path, lp in layers.items():
            iv = lp.intervention
            if iv is not None and iv.pre_pass_input() is not None and lp.head_site is None:
                union.setdefault(path, lp)
    if not union:
        return 0
    groups = source_groups(union, ctx.x, ctx.dev, ctx.codec)
    start = snapshot(ctx.module)
    try:
        source_outputs(ctx.module, union, groups, cache=ctx.shared.sources,
                       outputs=ctx.source_outputs)
    finally:
        restore(ctx.module, start)
    return len(groups)


def values_array(coords: Mapping[str, Sequence[Any]], got: Sequence[CellValue]) -> np.ndarray:
    """The values of ``got`` in the shape of the axes ``coords`` (NaN where a cell was not
    computed)."""
    shape = tuple(len(v) for v in coords.values())
    values = np.full(shape, np.nan)
    for c in got:
        values[c.index] = c.value
    return values
