"""Sweeps over a set of inputs: each cell is the mean of its metric over the inputs.

Every input gets its own sweep context (:func:`~.sweep_cells.prepare_sweep`: its baseline,
its source forwards, its cells' plans, positions counted on that input, so ``@pos=-1`` is
each input's last token whatever its length). The grid must be the same on every input
(an axis ``pos=all`` over inputs of different lengths is refused).

Cells run as rows of batched forwards where the model allows, as a single input's cells do
(:mod:`.sweep_batch`), but a batch's rows are ``(input, cell)`` pairs: inputs that share
their shapes are grouped, and one forward takes rows of several inputs, as many as the
batch budget holds. Each row equals its single-input cell up to a batched matrix product's
rounding; with ``batch=False`` every cell of every input is its own comparison, and the
per-input values equal the single-input sweeps bit for bit.

``estimate``: each input's cells are estimated (:mod:`.sweep_estimate`, one forward and one
backward an input) and the estimates averaged; ``verify`` runs the cells whose mean
estimate moves furthest from the mean clean metric, on every input.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Mapping, Sequence

import numpy as np
import torch

from ..base.errors import Cancelled, HookscopeError, InputError, PlanError
from ..base.meaning import OutputMeaning
from ..base.nested import tensor_leaves
from ..engine.forward_state import forward, restore, snapshot, to_device
from ..engine.run import stop_points
from .sweep_axes import DEFAULT_MAX_CELLS, axis_values
from .sweep_batch import (DEFAULT_BATCH_BYTES, DEFAULT_MAX_ROWS, NotRowwise, row_outputs,
                          rows_for_budget, rows_match, stack_rows)
from .sweep_cells import (CellValue, SweepContext, _single, batch_rows, batchable, prepare_sweep,
                          values_array)
from .sweep_estimate import (NOT_DIFFERENTIABLE, EstimateRefused, check_estimable,
                             estimate_cells, largest_changes)
from .sweep_metrics import NoScores

#: Rows one batched forward over several inputs holds at most, unless the caller says
#: otherwise (the batch budget may hold fewer).
DEFAULT_MAX_INPUT_ROWS = 256


def _rows_limit(batch: bool | int) -> int:
    if batch is True:
        return DEFAULT_MAX_INPUT_ROWS
    if batch is False or batch is None:
        return 1
    return int(batch)


def _shape_key(x: Any) -> tuple:
    return tuple((key, tuple(t.shape), str(t.dtype)) for key, t in tensor_leaves(x))


def _named(i: int, names: Sequence[str] | None) -> str:
    if names is not None and i < len(names):
        return f"input {i} ({names[i]})"
    return f"input {i}"


def check_grids(module: Any, inputs: Sequence[Any], over: Mapping[str, Any],
                names: Sequence[str] | None = None) -> None:
    """Refuse, before any forward, an input set whose inputs give different grids (an axis
    such as ``pos=all`` counts each input's positions), naming the first input that differs."""
    if len(inputs) == 0:
        raise InputError("the input set is empty: give a file or folder with at least one input")
    if not isinstance(over, Mapping):
        return  # refused as a single sweep refuses it
    first = None
    for i, x in enumerate(inputs):
        grid = {n: list(axis_values(n, v, module, x)) for n, v in over.items()}
        if first is None:
            first = grid
        elif grid != first:
            raise PlanError(f"{_named(i, names)} gives a different grid from input 0 (an axis "
                            "such as pos=all counts its positions): give positions that every "
                            "input has, e.g. pos=-3:0")


def prepare_inputs(module: Any, inputs: Sequence[Any], over: Mapping[str, Any],
                   intervene: Mapping[Any, Any], metric: Any, *, names: Sequence[str] | None,
                   bind_of: Callable[[Any], Callable[[dict], dict] | None],
                   estimate: bool, batch: bool | int = True,
                   batch_bytes: int = DEFAULT_BATCH_BYTES, **kw: Any) -> list[SweepContext]:
    """A sweep context per input; an input the model cannot take (or whose grid differs
    from the first input's) is refused naming it. Where cells batch, the first input of
    each shape runs its own baseline and the others' baselines are rows of batched forwards
    (checked against that first one)."""
    check_grids(module, inputs, over, names)
    rows_batch = DEFAULT_MAX_ROWS if batch is True else batch

    def one(i: int, like: tuple[SweepContext, Any] | None = None) -> SweepContext:
        x = inputs[i]
        try:
            ctx = prepare_sweep(module, x, over, intervene, metric, bind=bind_of(x),
                                measure=estimate, batch=rows_batch, batch_bytes=batch_bytes,
                                like=like, **kw)
        except NoScores as exc:
            if not estimate:
                raise
            raise EstimateRefused(NOT_DIFFERENTIABLE) from exc
        except Cancelled:
            raise
        except PlanError as exc:
            if i == 0:
                raise
            raise PlanError(f"{_named(i, names)}: {exc}") from exc
        except Exception as exc:  # the model's own error on this input
            first = str(exc).splitlines()[0][:300] if str(exc) else ""
            raise InputError(f"{_named(i, names)}: the model cannot take it "
                             f"({type(exc).__name__}: {first}); remove it from the set") from exc
        return ctx

    ctxs: dict[int, SweepContext] = {}
    groups: dict[tuple, list[int]] = {}
    for i, x in enumerate(inputs):
        groups.setdefault(_shape_key(x), []).append(i)
    for members in groups.values():
        lead = ctxs[members[0]] = one(members[0])
        rest = members[1:]
        outputs = _batched_baselines(lead, [inputs[i] for i in rest], batch, batch_bytes) \
            if rest and lead.rows >= 2 else None
        for n, i in enumerate(rest):
            ctxs[i] = one(i, None if outputs is None else (lead, outputs[n]))
    out = [ctxs[i] for i in range(len(inputs))]
    for i, ctx in enumerate(out):
        if ctx.coords != out[0].coords:
            raise PlanError(f"{_named(i, names)} gives a different grid from input 0 (an axis "
                            "such as pos=all counts its positions): give positions that every "
                            "input has, e.g. pos=-3:0")
    return out


def _batched_baselines(lead: SweepContext, xs: list[Any], batch: bool | int,
                       batch_bytes: int) -> list[Any] | None:
    """The model's output on each of ``xs`` (inputs shaped as ``lead``'s), as rows of batched
    forwards with ``lead``'s input as a last, checked row; ``None`` where a batch fails or
    its rows are not independent (each input then runs its own baseline)."""
    assert lead.shared is not None
    rows = max(2, rows_for_budget(lead.row_bytes, _rows_limit(batch), batch_bytes))
    got: list[Any] = []
    module = lead.module
    for start in range(0, len(xs), rows - 1):
        part = [to_device(x, lead.dev) for x in xs[start:start + rows - 1]] + [lead.x]
        xk = stack_rows(part)
        snap = snapshot(module)
        try:
            with stop_points(module, lead.should_stop):
                out = forward(module, xk, torch.inference_mode)
            outs = row_outputs(out, lead.shared.output, len(part))
        except Cancelled:
            raise
        except (HookscopeError, RuntimeError):
            return None
        finally:
            restore(module, snap)
        if not rows_match(outs[-1], lead.shared.output):
            return None
        lead.counts["baseline"] += 1
        got.extend(outs[:-1])
    return got


def input_cells(ctxs: list[SweepContext], cells: Sequence[int] | None, batch: bool | int,
                batch_bytes: int = DEFAULT_BATCH_BYTES,
                progress: Callable[[int, int], None] | None = None) -> list[list[CellValue]]:
    """``cells`` (positions in the grid; ``None``: all) on every input: a list of cell values
    per input, in the order of ``cells``. Rows of inputs with the same shapes share batched
    forwards; a cell that cannot be a row runs as its own comparison."""
    order = list(range(len(ctxs[0].grid))) if cells is None else [int(k) for k in cells]
    got: list[dict[int, CellValue]] = [{} for _ in ctxs]
    total = len(order) * len(ctxs)
    done = 0

    def arrived(pairs: list[tuple[int, int]], values: list[CellValue]) -> None:
        nonlocal done
        for (i, k), v in zip(pairs, values):
            got[i][k] = v
        done += len(pairs)
        if progress is not None:
            progress(done, total)

    limit = _rows_limit(batch)
    groups: dict[tuple, list[int]] = {}
    for i, ctx in enumerate(ctxs):
        groups.setdefault(_shape_key(ctx.x), []).append(i)
    for members in groups.values():
        pairs = [(i, k) for i in members for k in order]
        rowwise = [(i, k) for i, k in pairs if batchable(ctxs[i], k)]
        alone = [(i, k) for i, k in pairs if not batchable(ctxs[i], k)]
        for i, k in alone:
            arrived([(i, k)], [_single(ctxs[i], k)])
        if not rowwise:
            continue
        lead = ctxs[members[0]]
        rows = max(2, min(rows_for_budget(lead.row_bytes, limit, batch_bytes), len(rowwise) + 1))
        checked = False
        start = 0
        while start < len(rowwise):
            take = rows - (0 if checked else 1)
            chunk = rowwise[start:start + take]
            start += len(chunk)
            try:
                values = batch_rows([(ctxs[i], k) for i, k in chunk],
                                    None if checked else ctxs[chunk[0][0]])
                checked = True
            except Cancelled:
                raise
            except (NotRowwise, HookscopeError, RuntimeError) as exc:
                note = (f"a batched forward over {len(chunk)} input cells failed or its rows "
                        f"met ({type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}); "
                        "the cells ran one by one")
                for i in members:
                    ctxs[i].rows, ctxs[i].batch_note = 1, note
                rest = rowwise[start - len(chunk):]
                for i, k in rest:
                    arrived([(i, k)], [_single(ctxs[i], k)])
                break
            arrived(chunk, values)
    return [[g[k] for k in order] for g in got]


def sweep_over_inputs(module: Any, inputs: Sequence[Any], over: Mapping[str, Any],
                      intervene: Mapping[Any, Any], metric: Any = "max-abs-diff", *,
                      names: Sequence[str] | None = None, codec: Any = None,
                      meaning: OutputMeaning | None = None, device: str = "cpu",
                      max_cells: int = DEFAULT_MAX_CELLS,
                      should_stop: Callable[[], bool] | None = None,
                      progress: Callable[[int, int], None] | None = None,
                      bind: Callable[[dict], dict] | None = None,
                      bind_of: Callable[[Any], Callable[[dict], dict] | None] | None = None,
                      batch: bool | int = True, batch_bytes: int = DEFAULT_BATCH_BYTES,
                      normalise: bool = False, estimate: bool = False, verify: int = 0,
                      estimate_budget: int | None = None) -> Any:
    """:func:`~.sweep.sweep` over ``inputs`` (each a batch of one, as the model takes it):
    the result's :attr:`~.sweep.SweepResult.values` are each cell's mean over the inputs,
    :attr:`~.sweep.SweepResult.spread` their standard deviation (over the inputs, ``ddof=0``)
    and :attr:`~.sweep.SweepResult.per_input` every input's own grid (first axis: the input).
    ``names``: a short name per input for messages and files. ``bind_of(x)``: the cell binder
    for input ``x`` (where binding depends on the input, as ``--vector`` does); else ``bind``.
    See the module docstring for batching and estimates."""
    from .sweep import _verify_count, sweep_result, _with_estimates

    t0 = time.perf_counter()
    verify = _verify_count(verify, estimate)
    if normalise:
        raise PlanError("normalise runs on one input: drop it, or normalise each input's "
                        "per_input grid yourself")
    if estimate:
        check_estimable(module, metric, meaning)
    inputs = list(inputs)
    ctxs = prepare_inputs(module, inputs, over, intervene, metric, names=names,
                          bind_of=bind_of or (lambda x: bind), estimate=estimate, codec=codec,
                          meaning=meaning, device=device, max_cells=max_cells,
                          should_stop=should_stop, batch=batch, batch_bytes=batch_bytes)
    est = None
    cells: Sequence[int] | None = None
    if estimate:
        ests = [estimate_cells(ctx, estimate_budget) for ctx in ctxs]
        est = np.mean([e.values for e in ests], axis=0)
        clean = float(np.mean([e.clean for e in ests]))
        cells = largest_changes(est, clean, verify)
    got = input_cells(ctxs, cells, batch, batch_bytes, progress) if cells != [] else \
        [[] for _ in ctxs]
    per_input = np.stack([values_array(ctx.coords, g) for ctx, g in zip(ctxs, got)])
    res = sweep_result(ctxs[0], got[0])
    res.values = per_input.mean(axis=0)
    res.spread = per_input.std(axis=0)
    res.per_input = per_input
    res.inputs = [names[i] if names is not None and i < len(names) else str(i)
                  for i in range(len(inputs))]
    cleans = [ctx.clean for ctx in ctxs]
    known = [c for c in cleans if c is not None]
    res.baseline = float(np.mean(known)) if len(known) == len(cleans) else None
    res._cell = None  # a cell of a set is many runs: run_cell would take one input
    for key in ("baseline", "source", "intervened"):
        res.forwards[key] = sum(ctx.counts[key] + (ctx.counts["batched"] if key == "intervened"
                                                    else 0) for ctx in ctxs)
    if estimate:
        res.forwards["gradient"] = sum(ctx.counts.get("gradient", 0) for ctx in ctxs)
    batched = sum(1 for g in got for c in g if c.batched)
    res.batch = {"cells": batched, "forwards": sum(ctx.counts["batched"] for ctx in ctxs),
                 "note": next((ctx.batch_note for ctx in ctxs if ctx.batch_note), None),
                 "inputs": len(ctxs)}
    if est is not None:
        mean_got = [CellValue(c.index, float(res.values[c.index]), c.receipts, c.batched)
                    for c in got[0]]
        _with_estimates(res, est, mean_got)
        res.estimates_per_input = np.stack([e.values for e in ests])
    res.timings_ms["total"] = (time.perf_counter() - t0) * 1e3
    return res


__all__ = ["DEFAULT_MAX_INPUT_ROWS", "check_grids", "input_cells", "prepare_inputs", "sweep_over_inputs"]
