"""A sweep whose cells are split over a :class:`~.ray_pool.RayPool`: equal to the local one.

Each worker prepares the sweep once from the same description (the input text, axes,
templates and metric: :class:`SweepJob`), on its own copy of the model: its own shared
baseline and source forwards, one forward each per worker and sweep, run in parallel
(shipping one baseline from a first worker would cost the same forward, serially, plus
the transfer). The cells are cut into contiguous parts, a few per worker, that go to
whichever worker is free; a part whose worker dies runs again on another (see
:meth:`~.ray_pool.RayPool.map`). Every cell is the same :func:`~hookscope.core.engine.run.compare`
with the same baseline as in :func:`~hookscope.core.analyses.sweep.sweep`, so the values,
their order and the receipts are the local ones; only ``forwards`` differ (each worker
pays its own baseline).

An estimated sweep (``estimate=True``) estimates every cell on one worker (one forward and
one backward, :func:`~hookscope.core.analyses.sweep_estimate.estimate_cells`: no pool makes
that faster), then the ``verify`` cells it moves most run as ordinary cells over the pool.
"""

from __future__ import annotations

import itertools
import time
import uuid
import weakref
from dataclasses import dataclass
from typing import Any, Callable, Mapping

import numpy as np

from ..base.errors import HookscopeError
from ..analyses.sweep_result import SweepResult, axis_labels, verify_count, with_estimates
from ..analyses.sweep_cells import (CellValue, SweepContext, prepare_sweep, sweep_cells,
                                   values_array)
from ..analyses.sweep_axes import DEFAULT_MAX_CELLS
from ..analyses.sweep_estimate import (check_estimable, estimate_cells, Estimates, largest_changes, prepared)
from ..model.inputs import parse_input
from ..session.runner import error_message
from .pool_errors import PoolTaskError
from ..engine.run import compare

#: Parts of a sweep per worker: enough to even out uneven cells and to move little work
#: when a worker dies, few enough that a part's round trip costs nothing beside its cells.
PARTS_PER_WORKER = 4


@dataclass(frozen=True)
class SweepJob:
    """A sweep as every worker rebuilds it (the fields of :func:`~hookscope.core.analyses.sweep.sweep`).

    ``input_text`` is parsed in the worker against the model's example input and
    tokenizer. ``bind``: a picklable ``bind(loaded, x) -> cell binder or None``, called in
    the worker (the CLI binds ``--source-input`` and ``--vector`` with it). ``key`` names
    this sweep in the workers' memo of prepared sweeps.
    """

    input_text: str | None
    over: Mapping[str, Any]
    intervene: Mapping[Any, Any]
    metric: Any = "max-abs-diff"
    device: str = "cpu"
    max_cells: int = DEFAULT_MAX_CELLS
    bind: Callable[[Any, Any], Any] | None = None
    key: str = ""
    #: as :func:`~hookscope.core.analyses.sweep.sweep`'s: a worker batches within its own parts
    batch: bool | int = True
    #: the sweep is estimated (its baseline notes the bytes a backward keeps)
    estimate: bool = False


@dataclass(frozen=True)
class Outline:
    """What the client needs to shape a sweep's result: the axes' values and labels."""

    coords: dict[str, list[Any]]
    labels: dict[str, list[str]]
    metric: str
    cells: int
    #: the forwards preparing took (the worker's baseline and source forwards)
    forwards: dict[str, int]


@dataclass(frozen=True)
class Part:
    """Some cells' values, the forwards they took, and the metric on the baseline when
    the part held the first cell."""

    cells: list[CellValue]
    forwards: dict[str, int]
    clean: float | None


# In a worker: the sweep prepared last (one entry: the next sweep replaces it), with the
# loaded model it was prepared on.
_prepared: dict[str, tuple[Any, str, SweepContext]] = {}


def _context(loaded: Any, job: SweepJob) -> tuple[SweepContext, bool]:
    """This worker's prepared sweep for ``job`` (made once), and whether it is new."""
    hit = _prepared.get("last")
    if hit is not None and hit[0]() is loaded and hit[1] == job.key and job.key:
        return hit[2], False
    _prepared.clear()
    x = parse_input(job.input_text or "", loaded.example_input, loaded.meaning.codec)
    bind = job.bind(loaded, x) if job.bind is not None else None
    if job.estimate:  # a metric or mode the estimate refuses, before any forward
        check_estimable(loaded.module, job.metric, loaded.meaning)
    ctx = prepared(lambda: prepare_sweep(
        loaded.module, x, job.over, job.intervene, job.metric, meaning=loaded.meaning,
        device=job.device, max_cells=job.max_cells, bind=bind, batch=job.batch,
        measure=job.estimate), job.estimate)
    _prepared["last"] = (weakref.ref(loaded), job.key, ctx)
    return ctx, True


def sweep_outline(loaded: Any, job: SweepJob) -> Outline:
    """Task: prepare the sweep (every cell's plan checked) and say its shape."""
    ctx, new = _context(loaded, job)
    labels = {n: axis_labels(n, v, ctx.inputs, ctx.codec) for n, v in ctx.coords.items()}
    return Outline(ctx.coords, labels, ctx.metric.name, len(ctx.grid),
                   dict(ctx.counts) if new else {})


def sweep_part(loaded: Any, cells: list[int], job: SweepJob) -> Part:
    """Task: the values of ``cells`` (positions in the grid); a cell that fails is named."""
    ctx, new = _context(loaded, job)
    before = {k: 0 for k in ctx.counts} if new else dict(ctx.counts)
    try:
        out: list[CellValue] = sweep_cells(ctx, cells)  # the part at once (batched where it can)
    except Exception:  # noqa: BLE001 - find the cell it happened in, one by one
        for k in cells:
            try:
                sweep_cells(ctx, [k])
            except Exception as exc:  # noqa: BLE001 - said with the cell it happened in
                raise _naming(exc, f"cell {describe_cell(ctx.cell_coords(k))}: ") from exc
        raise
    clean = ctx.clean if 0 in cells else None
    return Part(out, {k: v - before.get(k, 0) for k, v in ctx.counts.items()}, clean)


def sweep_estimates(loaded: Any, _item: Any, job: SweepJob) -> tuple[Estimates, float | None,
                                                                    dict[str, int]]:
    """Task: every cell's first-order estimate, the metric on the baseline run, and the
    forwards this took here (the preparing's too where this worker had not prepared it)."""
    ctx, new = _context(loaded, job)
    before = {k: 0 for k in ctx.counts} if new else dict(ctx.counts)
    est = estimate_cells(ctx)
    return est, ctx.clean, {k: v - before.get(k, 0) for k, v in ctx.counts.items()}


def _naming(exc: BaseException, prefix: str) -> HookscopeError:
    """``exc`` with ``prefix`` before its message, of the same kind where it is a project
    exception that takes a message alone (else a plain :class:`HookscopeError`)."""
    message = prefix + error_message(exc)
    if isinstance(exc, HookscopeError):
        try:
            return type(exc)(message)
        except TypeError:
            pass
    return HookscopeError(message)


def unwrapped(call: Callable[[], Any]) -> Any:
    """``call()``, a task's own project exception raised as itself (the local sweep's kind
    and message: a failing cell names itself), the pool's error as its cause."""
    try:
        return call()
    except PoolTaskError as exc:
        if isinstance(exc.__cause__, HookscopeError):
            raise exc.__cause__ from exc
        raise


def sweep_cell_run(loaded: Any, coords: Mapping[str, Any], job: SweepJob) -> Any:
    """Task: one cell's comparison in full (a :class:`~hookscope.core.engine.run.RunResult`)."""
    ctx, _ = _context(loaded, job)
    return compare(ctx.module, ctx.inputs, ctx.cells.plan(coords), ctx.device, codec=ctx.codec)


def sweep_cell_plan(loaded: Any, coords: Mapping[str, Any], job: SweepJob) -> Any:
    """Task: one cell's plan."""
    ctx, _ = _context(loaded, job)
    return ctx.cells.plan(coords)


def describe_cell(coords: Mapping[str, Any]) -> str:
    return ", ".join(f"{n}={v!r}" if isinstance(v, str) else f"{n}={v}" for n, v in coords.items())


def pool_sweep(pool: Any, input_text: str | None, over: Mapping[str, Any],
               intervene: Mapping[Any, Any], metric: Any = "max-abs-diff", *,
               device: str = "cpu", max_cells: int = DEFAULT_MAX_CELLS,
               bind: Callable[[Any, Any], Any] | None = None,
               progress: Callable[[int, int], None] | None = None, batch: bool | int = True,
               parts_per_worker: int = PARTS_PER_WORKER,
               outline: Callable[[Outline], None] | None = None, estimate: bool = False,
               verify: int = 0) -> SweepResult:
    """:func:`~hookscope.core.analyses.sweep.sweep` on ``pool``'s model, its cells spread over
    the workers (see the module docstring). ``input_text`` as ``--input`` (``None``: the
    model's example input); ``bind`` as :class:`SweepJob`'s; ``progress(done, total)`` in
    cells, here, as parts arrive; ``outline(o)`` once the grid is known, before any cell runs.
    Every cell's plan is checked on a worker before any cell runs (a bad template fails
    once, whole). A failing cell raises what the local sweep raises (a
    :class:`~hookscope.core.base.errors.ForwardError` for a model that throws), its message
    starting with the cell (``cell layer='blocks.1', pos=3: ...``); a part of the grid that
    no live worker could compute raises :class:`~.ray_pool.PoolError` naming its cells.
    ``estimate``/``verify``: as the local sweep's (see the module docstring); ``progress``
    then counts the verified cells.
    """
    t0 = time.perf_counter()
    verify = verify_count(verify, estimate)
    job = SweepJob(input_text, dict(over), dict(intervene), metric, device, max_cells, bind,
                   uuid.uuid4().hex, batch, estimate)
    shape = unwrapped(lambda: pool.run_one(sweep_outline, job))
    if outline is not None:
        outline(shape)
    t_outline = time.perf_counter() - t0
    est: Estimates | None = None
    todo = np.arange(shape.cells)
    counted = [shape.forwards]
    if estimate:  # one forward and one backward, on one worker
        est, est_clean, est_forwards = unwrapped(lambda: pool.run_one(sweep_estimates, None,
                                                                       job))
        todo = np.array(largest_changes(est.values, est.clean, verify), dtype=int)
        counted.append(est_forwards)
    n_parts = max(1, min(len(todo), pool.size * max(1, parts_per_worker)))
    parts = [p.tolist() for p in np.array_split(todo, n_parts)] if len(todo) else []
    names = list(shape.coords)
    grid = list(itertools.product(*(range(len(shape.coords[n])) for n in names)))

    def cell_name(k: int) -> str:
        return "cell " + describe_cell({n: shape.coords[n][i] for n, i in zip(names, grid[k])})

    def part_name(i: int) -> str:
        return ", ".join(cell_name(k) for k in parts[i])

    done = [0]

    def arrived(i: int, _part: Part) -> None:
        done[0] += len(parts[i])
        if progress is not None:
            progress(done[0], len(todo))

    answers: list[Part] = unwrapped(lambda: pool.map(sweep_part, parts, job, names=part_name,
                                                      on_result=arrived))
    cells = [c for a in answers for c in a.cells]
    forwards: dict[str, int] = {}
    for counts in [*counted, *(a.forwards for a in answers)]:
        for k, v in counts.items():
            forwards[k] = forwards.get(k, 0) + v
    forwards["intervened"] = forwards.get("intervened", 0) + forwards.pop("batched", 0)
    clean = est_clean if est is not None else next(
        (a.clean for a in answers if a.clean is not None), None)

    def run_cell(c: Mapping[str, Any]) -> Any:
        return unwrapped(lambda: pool.run_one(sweep_cell_run, dict(c), job))

    def plan_of(c: Mapping[str, Any]) -> Any:
        return unwrapped(lambda: pool.run_one(sweep_cell_plan, dict(c), job))

    timings = {"total": (time.perf_counter() - t0) * 1e3, "outline": t_outline * 1e3}
    res = SweepResult(values_array(shape.coords, cells), shape.labels, shape.coords,
                      shape.metric, clean, {c.index: c.receipts for c in cells}, timings,
                      forwards, run_cell, plan_of,
                      batch={"cells": sum(1 for c in cells if c.batched), "note": None})
    if est is not None:
        with_estimates(res, est.values, cells)
    return res
