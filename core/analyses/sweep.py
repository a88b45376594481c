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

import dataclasses
import itertools
import math
import time
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

import numpy as np
import torch
from torch import nn

from ..base.errors import HookscopeError, PlanError
from ..base.meaning import OutputMeaning
from ..plan.plan import Plan
from ..plan.intervention_registry import parse_intervention
from ..engine.run import compare
from .sweep_axes import (DEFAULT_MAX_CELLS, axis_count, axis_values, check_size, fill,
                         placeholders)
from .sweep_batch import DEFAULT_BATCH_BYTES
from .sweep_cells import Cells, CellValue, check_used, prepare_sweep, sweep_cells
from .sweep_metrics import make_metric
from .sweep_estimate import (SharedGradients, check_estimable, estimate_cells, prepared,
                             verify_cells)
from .sweep_inputs import sweep_over_inputs
from .sweep_result import SweepResult, normal_ends, sweep_result, verify_count, with_estimates


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
                math.prod(axis_count(axes[n]) for n in names) > MAX_SOURCE_TEMPLATES:
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


def shares_baseline(device: str, verify: int) -> bool:
    """Whether an estimated sweep's forward with gradients may stand in for its baseline.
    On the CPU its values are the plain forward's bit for bit (frozen parameters, a
    negative zero added at each swept place, the same kernels). On an accelerator some
    kernels are chosen by whether inputs require gradients (CUDA's attention backends), so
    where verified cells are read against the baseline (their receipts, a metric of both
    outputs) a plain baseline runs, as the exact sweep's does; the estimate alone reads
    only the clean metric from it."""
    if not verify:
        return True
    try:
        return torch.device(device).type == "cpu"
    except (RuntimeError, TypeError):  # refused with its reason where the sweep resolves it
        return False


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
    forward and one backward (:mod:`.sweep_estimate`; :attr:`SweepResult.estimates`; that
    forward is also the shared baseline where the model gets one), then
    run for real only the ``verify`` cells whose estimate moves furthest from the clean
    run (:attr:`SweepResult.verified`; :attr:`~SweepResult.values` holds those, NaN
    elsewhere). ``estimate_budget``: the bytes the forward with gradients may keep
    (default: half the free memory).

    ``input_set``: many inputs (each as ``inputs`` would be; ``inputs`` is then ignored):
    each cell is the mean over them, with :attr:`SweepResult.spread` and
    :attr:`SweepResult.per_input` (:mod:`.sweep_inputs`; ``input_names`` name them).
    """
    if input_set is not None:
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
    verify = verify_count(verify, estimate)
    if estimate:  # a metric or mode the estimate refuses is said before any forward
        check_estimable(module, metric, meaning)
    # the estimate's forward with gradients is the shared baseline where there is one (see
    # shares_baseline)
    gradients = SharedGradients(estimate_budget) if estimate and shares_baseline(device, verify) \
        else None
    ctx = prepared(lambda: prepare_sweep(
        module, inputs, over, intervene, metric, codec=codec, meaning=meaning, device=device,
        max_cells=max_cells, should_stop=should_stop, bind=bind, batch=batch,
        batch_bytes=batch_bytes, measure=estimate, shared_forward=gradients), estimate)
    if normalise:
        normal_ends(ctx)  # refused before the cells run
    est = None
    if estimate:
        est = estimate_cells(ctx, estimate_budget, gradients)

    def result(so_far: Sequence[CellValue], normal: bool = False) -> SweepResult:
        res = sweep_result(ctx, so_far, normalise=normal)
        if est is not None:
            with_estimates(res, est.values, so_far)
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


