"""A sweep over an input set whose inputs are split into shards over a
:class:`~.ray_pool.RayPool`: equal to the local one.

Each shard is a run of consecutive inputs; a worker runs the ordinary input-set sweep on
it (:func:`~hookscope.core.analyses.sweep_inputs.prepare_inputs` and
:func:`~hookscope.core.analyses.sweep_inputs.input_cells`: every input its own baseline,
rows of inputs of one shape sharing batched forwards), and the shards' parts are merged
here as the local sweep merges its own (:func:`~hookscope.core.analyses.sweep_inputs.inputs_result`:
every input's grid stacked in the set's order, then the mean and spread reduced once), so
``per_input`` is every input's own grid and the mean and spread are the local ones, bit
for bit where neither side batches (``batch=False``); batched, to a batched matrix
product's rounding (a worker's batches hold other rows than the local ones).

Before any shard runs, one worker reads every input (one the model cannot take is refused
naming it), checks that every input gives the same grid and checks the templates and the
metric on the first input (nothing runs): a bad sweep fails once, whole.

``estimate``: each shard estimates its inputs (one forward and one backward an input);
the estimates come back here and are averaged as the local sweep averages them; then the
``verify`` cells whose mean estimate moves most run on every input, shard by shard. A
worker keeps the shards it prepared for the estimate until their cells have run, so a
shard that comes back to it runs no baseline again (one that goes to another worker
prepares it there); a sweep without an estimate keeps nothing.

An image folder or a text file is read by the workers from the same path (a cluster needs
it on a shared file system); a ``.pt`` or ``.safetensors`` set travels inside the job.
"""

from __future__ import annotations

import math
import time
import uuid
import weakref
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from ..analyses.sweep import sweep_size
from ..analyses.sweep_axes import DEFAULT_MAX_CELLS
from ..analyses.sweep_cells import Cells, SweepContext
from ..analyses.sweep_estimate import check_estimable, estimate_cells
from ..analyses.sweep_inputs import (InputsPart, check_grids, forwards_of, input_cells,
                                     inputs_part, inputs_result, prepare_inputs, verify_choice)
from ..analyses.sweep_result import SweepResult, verify_count
from ..base.errors import InputError
from ..dataset import InputSet, read_items
from .pool_sweep import PARTS_PER_WORKER, unwrapped


@dataclass(frozen=True)
class InputsJob:
    """An input-set sweep as every worker rebuilds it (the fields of
    :func:`~hookscope.core.analyses.sweep_inputs.sweep_over_inputs`). ``inputs`` is read in
    the worker against the model's example input and tokenizer; ``names``: a short name per
    input; ``what``: the set as the person named it (``--inputs prompts.txt``), for
    messages; ``bind``: a picklable ``bind(loaded, x) -> cell binder or None``, made with
    the set's first input; ``key`` names this sweep in the workers' memo."""

    inputs: InputSet
    names: list[str]
    what: str
    over: Mapping[str, Any]
    intervene: Mapping[Any, Any]
    metric: Any = "max-abs-diff"
    device: str = "cpu"
    max_cells: int = DEFAULT_MAX_CELLS
    bind: Callable[[Any, Any], Any] | None = None
    key: str = ""
    batch: bool | int = True
    estimate: bool = False


# In a worker: the shards of the sweep prepared last, with the loaded model they were
# prepared on (the next sweep replaces them).
_prepared: dict[tuple[int, ...], tuple[Any, str, list[SweepContext]]] = {}


def _binder(loaded: Any, job: InputsJob, first: Any = None) -> Any:
    """The cell binder of ``job`` on this worker, made with the set's first input."""
    if job.bind is None:
        return None
    if first is None:
        first = read_items(job.inputs, [0], loaded.example_input, loaded.meaning.codec,
                           job.what)[0]
    return job.bind(loaded, first)


def _contexts(loaded: Any, shard: list[int], job: InputsJob) -> tuple[list[SweepContext], bool]:
    """This worker's prepared contexts of ``shard`` (made once a job), and whether new."""
    key = tuple(shard)
    hit = _prepared.get(key)
    if hit is not None and hit[0]() is loaded and hit[1] == job.key and job.key:
        return hit[2], False
    for k in [k for k, v in _prepared.items() if v[1] != job.key or v[0]() is not loaded]:
        del _prepared[k]
    items = read_items(job.inputs, shard, loaded.example_input, loaded.meaning.codec, job.what)
    bind = _binder(loaded, job, items[0] if shard[0] == 0 else None)
    ctxs = prepare_inputs(loaded.module, items, job.over, job.intervene, job.metric,
                          names=[job.names[i] for i in shard], bind_of=lambda x: bind,
                          estimate=job.estimate, batch=job.batch, offset=shard[0],
                          meaning=loaded.meaning, device=job.device, max_cells=job.max_cells)
    if job.estimate:  # kept from the estimate for the verified cells (see inputs_shard)
        _prepared[key] = (weakref.ref(loaded), job.key, ctxs)
    return ctxs, True


def inputs_outline(loaded: Any, _item: Any, job: InputsJob) -> dict[str, int]:
    """Task: every input read, the grid the same on each, the templates and metric checked
    on the first input (nothing runs); ``{axis: number of values}``."""
    items = read_items(job.inputs, range(len(job.inputs)), loaded.example_input,
                       loaded.meaning.codec, job.what)
    sizes = sweep_size(loaded.module, items[0], job.over, job.max_cells, job.intervene,
                       job.metric, loaded.meaning, _binder(loaded, job, items[0]))
    check_grids(loaded.module, items, job.over, job.names)
    if job.estimate:
        check_estimable(loaded.module, job.metric, loaded.meaning)
    return sizes


def inputs_estimates(loaded: Any, shard: list[int], job: InputsJob) -> tuple[
        list[np.ndarray], list[float], dict[str, int]]:
    """Task: every input's estimates and clean metric in ``shard``, and the forwards that
    took (preparing the shard included)."""
    ctxs, _ = _contexts(loaded, shard, job)
    ests = [estimate_cells(ctx) for ctx in ctxs]
    return [e.values for e in ests], [e.clean for e in ests], forwards_of(ctxs)


def inputs_shard(loaded: Any, shard: list[int], job: InputsJob,
                 cells: list[int] | None) -> InputsPart:
    """Task: ``cells`` (positions in the grid; ``None``: all) on every input of ``shard``;
    the part's forwards are those this call ran (a shard prepared before: none of its
    baselines)."""
    ctxs, new = _contexts(loaded, shard, job)
    before = None if new else forwards_of(ctxs)
    got = input_cells(ctxs, cells, job.batch) if cells != [] else [[] for _ in ctxs]
    part = inputs_part(ctxs, got, holds_first=shard[0] == 0)
    if before is not None:
        part.forwards = {k: v - before.get(k, 0) for k, v in part.forwards.items()}
        part.batch_forwards -= before["batched"]
    _prepared.pop(tuple(shard), None)  # the shard is done: its baselines are not kept
    if part.first is not None:  # its cell runner and plans are this worker's: not sent
        part.first._cell = part.first._plan = None
    return part


def inputs_cell_plan(loaded: Any, coords: Mapping[str, Any], job: InputsJob) -> Any:
    """Task: one cell's plan (bound with the set's first input)."""
    return Cells(job.intervene, _binder(loaded, job)).plan(coords)


def pool_sweep_inputs(pool: Any, inputs: InputSet, over: Mapping[str, Any],
                      intervene: Mapping[Any, Any], metric: Any = "max-abs-diff", *,
                      names: Sequence[str] | None = None, what: str = "the input set",
                      device: str = "cpu", max_cells: int = DEFAULT_MAX_CELLS,
                      bind: Callable[[Any, Any], Any] | None = None, batch: bool | int = True,
                      estimate: bool = False, verify: int = 0,
                      progress: Callable[[int, int], None] | None = None,
                      outline: Callable[[dict[str, int]], None] | None = None,
                      parts_per_worker: int = PARTS_PER_WORKER) -> SweepResult:
    """:func:`~hookscope.core.analyses.sweep_inputs.sweep_over_inputs` on ``pool``'s model,
    the inputs of ``inputs`` in shards over the workers (see the module docstring).
    ``names``: a short name per input (default: the set's own); ``what``: the set as the
    person named it, in messages; ``bind`` as :class:`InputsJob`'s; ``progress(done,
    total)`` in (input, cell) pairs, here, as shards arrive; ``outline(sizes)`` once the
    grid is known, before any forward. A failing input or cell raises what the local
    sweep raises; a shard no live worker could compute raises
    :class:`~.pool_errors.PoolError` naming its inputs."""
    t0 = time.perf_counter()
    verify = verify_count(verify, estimate)
    n = len(inputs)
    if n == 0:
        raise InputError("the input set is empty: give a file or folder with at least one input")
    named = list(names) if names is not None else [inputs.describe(i) for i in range(n)]
    job = InputsJob(inputs, named, what, dict(over), dict(intervene), metric, device,
                    max_cells, bind, uuid.uuid4().hex, batch, estimate)
    sizes = unwrapped(lambda: pool.run_one(inputs_outline, None, job))
    if outline is not None:
        outline(sizes)
    shards = [s.tolist() for s in
              np.array_split(np.arange(n), max(1, min(n, pool.size * max(1, parts_per_worker))))]

    def shard_name(i: int) -> str:
        a, b = shards[i][0], shards[i][-1]
        return f"input {a}" if a == b else f"inputs {a}-{b}"

    ests: list[np.ndarray] | None = None
    todo: list[int] | None = None
    first_forwards: list[dict[str, int]] = [{} for _ in shards]
    if estimate:
        answers = unwrapped(lambda: pool.map(inputs_estimates, shards, job, names=shard_name))
        ests = [v for a in answers for v in a[0]]
        todo = verify_choice(ests, [c for a in answers for c in a[1]], verify)
        first_forwards = [a[2] for a in answers]
    per_input = math.prod(sizes.values()) if todo is None else len(todo)
    done = [0]

    def arrived(i: int, _part: InputsPart) -> None:
        done[0] += len(shards[i]) * per_input
        if progress is not None:
            progress(done[0], n * per_input)

    parts: list[InputsPart] = unwrapped(lambda: pool.map(
        inputs_shard, shards, job, todo, names=shard_name, on_result=arrived))
    for part, counted in zip(parts, first_forwards):
        for k, v in counted.items():
            if k == "batched":
                part.batch_forwards += v
            else:
                part.forwards[k] = part.forwards.get(k, 0) + v
    res = inputs_result(parts, named, ests)

    def plan_of(c: Mapping[str, Any]) -> Any:
        return unwrapped(lambda: pool.run_one(inputs_cell_plan, dict(c), job))

    res._plan = plan_of
    res.timings_ms["total"] = (time.perf_counter() - t0) * 1e3
    return res


__all__ = ["InputsJob", "pool_sweep_inputs"]
