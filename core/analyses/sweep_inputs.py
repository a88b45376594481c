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
from dataclasses import dataclass
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
from .sweep_estimate import (check_estimable, estimate_cells, EstimateRefused, largest_changes, prepared)
from .sweep_result import SweepResult, sweep_result, verify_count, with_estimates

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


def _named(i: int, names: Sequence[str] | None, offset: int = 0) -> str:
    if names is not None and i < len(names):
        return f"input {offset + i} ({names[i]})"
    return f"input {offset + i}"


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
                   batch_bytes: int = DEFAULT_BATCH_BYTES, offset: int = 0,
                   **kw: Any) -> list[SweepContext]:
    """A sweep context per input; an input the model cannot take (or whose grid differs
    from the first input's) is refused naming it (``offset``: the number of ``inputs[0]``
    in its set, where these are a shard of it). Where cells batch, the first input of
    each shape runs its own baseline and the others' baselines are rows of batched forwards
    (checked against that first one)."""
    check_grids(module, inputs, over, names)
    rows_batch = DEFAULT_MAX_ROWS if batch is True else batch

    def one(i: int, like: tuple[SweepContext, Any] | None = None) -> SweepContext:
        x = inputs[i]
        try:
            ctx = prepared(lambda: prepare_sweep(
                module, x, over, intervene, metric, bind=bind_of(x), measure=estimate,
                batch=rows_batch, batch_bytes=batch_bytes, like=like, **kw), estimate)
        except (Cancelled, EstimateRefused):
            raise
        except PlanError as exc:
            if offset + i == 0:
                raise
            raise PlanError(f"{_named(i, names, offset)}: {exc}") from exc
        except Exception as exc:  # the model's own error on this input
            first = str(exc).splitlines()[0][:300] if str(exc) else ""
            raise InputError(f"{_named(i, names, offset)}: the model cannot take it "
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
            raise PlanError(f"{_named(i, names, offset)} gives a different grid from input 0 (an axis "
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
    the result's :attr:`~.sweep_result.SweepResult.values` are each cell's mean over the inputs,
    :attr:`~.sweep_result.SweepResult.spread` their standard deviation (over the inputs, ``ddof=0``)
    and :attr:`~.sweep_result.SweepResult.per_input` every input's own grid (first axis: the input).
    ``names``: a short name per input for messages and files. ``bind_of(x)``: the cell binder
    for input ``x`` (where binding depends on the input, as ``--vector`` does); else ``bind``.
    See the module docstring for batching and estimates."""
    t0 = time.perf_counter()
    verify = verify_count(verify, estimate)
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
    ests = None
    cells: Sequence[int] | None = None
    if estimate:
        ests = [estimate_cells(ctx, estimate_budget) for ctx in ctxs]
        cells = verify_choice([e.values for e in ests], [e.clean for e in ests], verify)
    got = input_cells(ctxs, cells, batch, batch_bytes, progress) if cells != [] else \
        [[] for _ in ctxs]
    part = inputs_part(ctxs, got, holds_first=True)
    res = inputs_result([part], [names[i] if names is not None and i < len(names) else str(i)
                                 for i in range(len(inputs))],
                        None if ests is None else [e.values for e in ests])
    res.timings_ms["total"] = (time.perf_counter() - t0) * 1e3
    return res


def verify_choice(estimates: Sequence[np.ndarray], cleans: Sequence[float], verify: int) -> list[int]:
    """The ``verify`` cells whose mean estimate over the inputs (``estimates``: one grid an
    input, in the set's order) moves furthest from the mean clean metric."""
    return largest_changes(np.mean(estimates, axis=0), float(np.mean(cleans)), verify)


@dataclass
class InputsPart:
    """Some inputs' share of a sweep over an input set (a shard's, on a pool worker, or every
    input's here): their own grids and what they cost. :func:`inputs_result` makes the
    whole's result of the parts, in the inputs' order."""

    #: every input's own grid (first axis: the input)
    per_input: np.ndarray
    #: the metric on each input's baseline run (``None`` for a metric of a difference)
    cleans: list[float | None]
    #: forwards run: baseline, source, intervened (a batched forward is one), gradient
    forwards: dict[str, int]
    #: cells run as rows of batched forwards, those forwards, and why cells ran alone
    batched: int = 0
    batch_forwards: int = 0
    note: str | None = None
    #: where the part holds the set's first input: the result shaped by it (labels,
    #: receipts, timings) and its computed cells, in the order they were asked for
    first: SweepResult | None = None
    first_cells: list[CellValue] | None = None


def forwards_of(ctxs: Sequence[SweepContext]) -> dict[str, int]:
    """The forwards ``ctxs`` have run, as :attr:`InputsPart.forwards` counts them."""
    out = {key: sum(ctx.counts[key] + (ctx.counts["batched"] if key == "intervened" else 0)
                    for ctx in ctxs) for key in ("baseline", "source", "intervened")}
    out["gradient"] = sum(ctx.counts.get("gradient", 0) for ctx in ctxs)
    out["batched"] = sum(ctx.counts["batched"] for ctx in ctxs)
    return out


def inputs_part(ctxs: Sequence[SweepContext], got: Sequence[Sequence[CellValue]],
                holds_first: bool) -> InputsPart:
    """The :class:`InputsPart` of ``ctxs`` (some inputs' contexts, in the set's order) and
    their computed cells ``got`` (:func:`input_cells`); ``holds_first``: ``ctxs[0]`` is the
    set's first input."""
    counted = forwards_of(ctxs)
    return InputsPart(np.stack([values_array(ctx.coords, g) for ctx, g in zip(ctxs, got)]),
                      [ctx.clean for ctx in ctxs], counted,
                      batched=sum(1 for g in got for c in g if c.batched),
                      batch_forwards=counted.pop("batched"),
                      note=next((ctx.batch_note for ctx in ctxs if ctx.batch_note), None),
                      first=sweep_result(ctxs[0], got[0]) if holds_first else None,
                      first_cells=list(got[0]) if holds_first else None)


def inputs_result(parts: Sequence[InputsPart], names: list[str],
                  estimates: Sequence[np.ndarray] | None = None) -> SweepResult:
    """The sweep over an input set made of its ``parts`` (in the inputs' order; one holds
    the first input): the mean of every cell over the inputs, its spread and every input's
    grid; ``names``: every input's; ``estimates``: every input's estimates where the sweep
    was estimated. The numbers are the same whatever the parts (one array, reduced once)."""
    first = next(p for p in parts if p.first is not None)
    res = first.first
    assert res is not None and first.first_cells is not None
    per_input = np.concatenate([p.per_input for p in parts])
    res.values = per_input.mean(axis=0)
    res.spread = per_input.std(axis=0)
    res.per_input = per_input
    res.inputs = list(names)
    cleans = [c for p in parts for c in p.cleans]
    known = [c for c in cleans if c is not None]
    res.baseline = float(np.mean(known)) if len(known) == len(cleans) else None
    res._cell = None  # a cell of a set is many runs: run_cell would take one input
    for key in ("baseline", "source", "intervened", *(("gradient",) if estimates is not None
                                                       else ())):
        res.forwards[key] = sum(p.forwards.get(key, 0) for p in parts)
    res.batch = {"cells": sum(p.batched for p in parts),
                 "forwards": sum(p.batch_forwards for p in parts),
                 "note": next((p.note for p in parts if p.note), None), "inputs": len(cleans)}
    if estimates is not None:
        mean_got = [CellValue(c.index, float(res.values[c.index]), c.receipts, c.batched)
                    for c in first.first_cells]
        with_estimates(res, np.mean(estimates, axis=0), mean_got)
        res.estimates_per_input = np.stack(estimates)
    return res

__all__ = ["DEFAULT_MAX_INPUT_ROWS", "InputsPart", "check_grids", "forwards_of", "input_cells",
           "inputs_part", "inputs_result", "prepare_inputs", "sweep_over_inputs", "verify_choice"]
