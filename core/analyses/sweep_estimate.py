"""A sweep's cells estimated to first order (attribution patching), then the largest proved.

Every cell is estimated as the metric on the clean run plus ``<dmetric/da, delta>``: ``a``
is the activation where the cell's intervention acts (a layer's output, or at a head site
its output projection's input, per call), ``delta`` what the intervention would change
there, found by applying the intervention itself to the clean activation and subtracting
(``patch``: source - clean, ``zero``: -clean, and any kind alike, a registered one
included; its ``@pos``/``@heads``/``@units`` narrowing is its own ``apply``'s). A cell with
several interventions adds their terms.

What this costs, whatever the number of cells: one clean forward with gradients kept only
at the swept places, one backward, the sweep's source forwards (:func:`~.sweep_cells.prepare_sweep`)
and an inner product a cell. Where the sweep shares one baseline (a model whose kernels do
not follow its hooks, one input in process), the forward with gradients is that baseline
(:class:`SharedGradients`): its values are the plain forward's, so the clean input runs
once. Elsewhere (a model whose kernels follow its hooks, an input set whose baselines are
rows of batched forwards, a Ray worker's prepared sweep) it runs beside the baselines. The
forward with gradients keeps what its backward needs (about every activation of the
model), estimated as twice its leaf modules' outputs: checked against the memory budget
before it runs where a baseline already measured them, else as it runs, stopped once it
passes the budget. Parameters do not require gradients during it (restored after).

Each swept place gets ``output + z`` where ``z`` is a zero leaf that requires gradients:
``dmetric/dz`` is the metric's gradient at that output through every path after it, the
values are unchanged, and an in-place op after the layer (``ReLU(inplace=True)``) changes
the sum, not the recorded activation.

:func:`verify_cells` then runs the cells the estimate moves most, for real, with the
sweep's own cell runner (batched as a sweep's cells are).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np
import torch
from torch import nn

from ..base.errors import Cancelled, HookscopeError, PlanError
from ..base.meaning import OutputMeaning
from ..base.nested import map_tensors, map_tensors_keyed, tensor_leaves
from .capture_budget import default_budget
from ..engine.forward_state import forward, own_copy, restore, snapshot
from ..engine.hook_handles import register_layer_hook
from ..engine.run import stop_points
from ..engine.source_pass import source_groups, source_outputs
from ..plan.intervention_base import InterventionContext
from ..plan.plan import LayerPlan
from .sweep_batch import leaf_bytes, row_target
from .sweep_cells import CellValue, SweepContext, sweep_cells
from .sweep_metrics import Metric, NoScores, make_metric

#: What an output that holds no floating-point scores is told.
NOT_DIFFERENTIABLE = ("the model's output holds no floating-point scores (integer outputs), so "
                      "there is nothing to differentiate: drop --estimate and run the cells")


class EstimateRefused(PlanError):
    """This sweep cannot be estimated to first order; the message says why and what to use."""


def prepared(prepare: Callable[[], SweepContext], estimate: bool) -> SweepContext:
    """``prepare()`` (a sweep's preparation); an output with no scores (:class:`NoScores`)
    is the estimate's refusal when the sweep is estimated."""
    try:
        return prepare()
    except NoScores as exc:
        if not estimate:
            raise
        raise EstimateRefused(NOT_DIFFERENTIABLE) from exc


@dataclass
class _Site:
    """One swept place: the layer's value (output, ``:input``, ``resid_mid``) or a head
    site's output projection input, and per call the clean activation and the zero leaves
    added to it."""

    lp: LayerPlan
    clean: list[Any] = field(default_factory=list)
    zeros: list[dict[str, torch.Tensor]] = field(default_factory=list)

    def attach(self) -> Any:
        """The hook on this place; its handle."""
        site = self.lp.head_site
        if site is not None and site.projection is not None:
            return site.projection.register_forward_pre_hook(self.pre_hook)
        return register_layer_hook(self.lp, self.hook)

    def _add(self, value: Any) -> Any:
        self.clean.append(map_tensors(lambda t: t.detach().clone(), value))
        zs: dict[str, torch.Tensor] = {}

        def with_zero(t: torch.Tensor, key: str) -> torch.Tensor:
            if not t.is_floating_point():
                return t
            # -0.0: x + (-0.0) is x for every x, +0.0 included, so the values are the clean
            # forward's bit for bit (x + 0.0 would turn -0.0 into +0.0)
            z = zs[key] = torch.full_like(t, -0.0, requires_grad=True)
            return t + z

        out = map_tensors_keyed(with_zero, value)
        self.zeros.append(zs)
        return out

    def hook(self, module: nn.Module, args: Any, output: Any) -> Any:
        return self._add(output)

    def pre_hook(self, module: nn.Module, args: Any) -> Any:
        if not args:
            return None
        return (self._add(args[0]), *args[1:])


def _refusal_of(module: nn.Module, met: Metric) -> str | None:
    if met.grad is None:
        why = met.no_grad or "it is no function of the output that autograd can follow"
        return (f"metric {met.name!r} has no first-order signal ({why}): estimate with "
                "logit-diff:A,B, logit:T or prob:T, or drop --estimate and run the cells")
    if any(m.training for m in module.modules()):
        return ("the model is in train mode (dropout and batch statistics change between the "
                "forward that is differentiated and the cells): drop --train, or drop --estimate")
    return None


def check_metric_estimable(metric: str) -> None:
    """Refuse a metric that has no first-order signal whatever the model (``kl``,
    ``top-changed``, ...), from its text alone: before a model is at hand, as before a Ray
    pool starts. A metric that only the model can read (a class label) is left to
    :func:`check_estimable`."""
    try:
        met = make_metric(metric, None)
    except HookscopeError:
        return
    if met.grad is None:
        raise EstimateRefused(_refusal_of(nn.Module(), met) or "")


def check_estimable(module: nn.Module, metric: Any, meaning: OutputMeaning | None = None) -> None:
    """Refuse, before anything runs, a metric (a :class:`~.sweep_metrics.Metric`, or as
    :func:`~.sweep_metrics.make_metric` takes it) with no first-order signal, or a model in
    train mode (:class:`EstimateRefused`)."""
    met = metric if isinstance(metric, Metric) else make_metric(metric, meaning)
    why = _refusal_of(module, met)
    if why is not None:
        raise EstimateRefused(why)


def refusal(ctx: SweepContext) -> str | None:
    """Why this sweep cannot be estimated (``None``: it can)."""
    why = _refusal_of(ctx.module, ctx.metric)
    if why is not None:
        return why
    for layers in ctx.resolved:
        for path, lp in layers.items():
            if lp.head_site is not None and lp.head_site.recompute:
                return (f"layer {path!r}: the heads of an nn.MultiheadAttention are computed "
                        "again inside its hook, which no gradient reaches: drop --estimate "
                        "and run the cells")
    return None


def _site_key(lp: LayerPlan) -> tuple[int, str]:
    """Which place a cell's intervention acts at: one site per place, whatever the cell."""
    if lp.mid_block is not None:
        return id(lp.module), "resid_mid"
    target, pre = row_target(lp)
    return id(target), "input" if pre else "output"


def _sites(ctx: SweepContext) -> dict[tuple[int, str], _Site]:
    sites: dict[tuple[int, str], _Site] = {}
    for layers in ctx.resolved:
        for lp in layers.values():
            sites.setdefault(_site_key(lp), _Site(lp))
    return sites


def _sources(ctx: SweepContext) -> dict[Any, dict[str, list[Any]]]:
    """``{source key: {path: source outputs per call}}`` of every cell's patches and reference
    means: from the sweep's shared cache, a source forward only for what it lacks."""
    by_key: dict[Any, dict[str, LayerPlan]] = {}
    for layers in ctx.resolved:
        for path, lp in layers.items():
            iv = lp.intervention
            if iv is not None and iv.pre_pass_input() is not None:
                by_key.setdefault(iv.source_key(), {}).setdefault(path, lp)
    cache = ctx.shared.sources if ctx.shared is not None else {}
    out: dict[Any, dict[str, list[Any]]] = {}
    start = snapshot(ctx.module)
    try:
        for key, layers in by_key.items():
            groups = source_groups(layers, ctx.x, ctx.dev, ctx.codec)
            known = cache.get(key)
            out[key] = source_outputs(ctx.module, layers, groups, cache=cache)
            if known is None or cache.get(key) is not known:
                ctx.counts["source"] += len(groups)
    finally:
        restore(ctx.module, start)
    return out


class _Sizes:
    """A forward hook adding up the bytes of each leaf module's output; with a ``limit``,
    the forward is stopped (:class:`_OverBudget`) as soon as twice that sum passes it."""

    def __init__(self, limit: int | None = None) -> None:
        self.total = 0
        self.limit = limit

    def __call__(self, module: nn.Module, args: Any, output: Any) -> None:
        self.total += leaf_bytes(output)
        if self.limit is not None and 2 * self.total > self.limit:
            raise _OverBudget()


class _OverBudget(HookscopeError):
    """The forward with gradients passed the memory budget; stopped where it did."""


def _leaves(module: nn.Module) -> list[nn.Module]:
    return [m for m in module.modules() if next(m.children(), None) is None]


def estimate_bytes(ctx: SweepContext) -> int:
    """What the forward with gradients keeps for its backward: about every leaf module's
    output of a plain forward (the baseline's; one forward of its own where the sweep has no
    such note), counted twice for what the ops between leaf modules keep."""
    if ctx.activation_bytes is None:
        sizes = _Sizes()
        handles = [m.register_forward_hook(sizes) for m in _leaves(ctx.module)]
        start = snapshot(ctx.module)
        try:
            with stop_points(ctx.module, ctx.should_stop):
                forward(ctx.module, own_copy(ctx.x))
        finally:
            for h in handles:
                h.remove()
            restore(ctx.module, start)
        ctx.counts["baseline"] += 1  # a plain forward, counted as one
        ctx.activation_bytes = sizes.total
    return 2 * ctx.activation_bytes


def _budget(dev: torch.device) -> int:
    if dev.type == "cuda":
        free, _ = torch.cuda.mem_get_info(dev)
        return free // 2
    return default_budget()


def _over_budget(need: int, budget: int) -> EstimateRefused:
    return EstimateRefused(
        f"the estimate's backward keeps about {need / 2**20:.0f} MiB of activations, over "
        f"the memory budget of {budget / 2**20:.0f} MiB: use a shorter input, or drop "
        "--estimate and run the cells")


@dataclass
class _Gradients:
    """The forward with gradients and its backward: the output (detached, on the CPU), the
    forward's milliseconds, every swept place (its clean activations per call) and the
    metric's gradient there per call."""

    output: Any
    ms: float
    sites: dict[tuple[int, str], _Site]
    grad_of: dict[tuple[int, str], list[dict[str, torch.Tensor | None]]]


def _gradients(ctx: SweepContext, budget_bytes: int | None) -> _Gradients:
    """One forward of the clean input with gradients kept at the swept places only, and the
    metric's backward to them. The memory budget is checked first where the sweep noted its
    activations' size (its baseline ran); otherwise as the forward goes, which is stopped
    once its leaf modules' outputs pass it (the refusal then measures the whole in a plain
    forward, to name it)."""
    why = refusal(ctx)
    if why is not None:
        raise EstimateRefused(why)
    t0 = time.perf_counter()
    budget = _budget(ctx.dev) if budget_bytes is None else budget_bytes
    watch = None
    if ctx.activation_bytes is not None:
        need = estimate_bytes(ctx)
        if need > budget:
            raise _over_budget(need, budget)
    else:
        watch = _Sizes(budget)
    sites = _sites(ctx)
    module = ctx.module
    params = [p for p in module.parameters() if p.requires_grad]
    start = snapshot(module)
    handles = []
    over = False
    try:
        for p in params:
            p.requires_grad_(False)
        if watch is not None:
            handles += [m.register_forward_hook(watch) for m in _leaves(module)]
        for s in sites.values():
            handles.append(s.attach())
        t1 = time.perf_counter()
        with stop_points(module, ctx.should_stop):
            out = forward(module, own_copy(ctx.x), torch.enable_grad)
        ms = (time.perf_counter() - t1) * 1e3
        for h in handles:
            h.remove()
        handles = []
        output = map_tensors(lambda t: t.detach().cpu(), out)
        base = (map_tensors(lambda t: t.to(ctx.dev), ctx.shared.output) if ctx.shared is not None
                else map_tensors(lambda t: t.detach(), out))
        with torch.enable_grad():
            m = _metric_tensor(ctx, base, out)
            zeros = [z for s in sites.values() for zs in s.zeros for z in zs.values()]
            grads = torch.autograd.grad(m, zeros, allow_unused=True) if zeros else ()
    except _OverBudget:
        over = True
    finally:
        for h in handles:
            h.remove()
        for p in params:
            p.requires_grad_(True)
        restore(module, start)
    if over:
        assert watch is not None
        sites.clear()  # what the stopped forward kept goes before the plain one runs
        raise _over_budget(max(estimate_bytes(ctx), 2 * watch.total), budget)
    ctx.counts["gradient"] = ctx.counts.get("gradient", 0) + 1
    found = iter(grads)
    grad_of: dict[tuple[int, str], list[dict[str, torch.Tensor | None]]] = {
        key: [{k: next(found) for k in zs} for zs in s.zeros] for key, s in sites.items()}
    ctx.timings_ms["gradient"] = (time.perf_counter() - t0) * 1e3
    return _Gradients(output, ms, sites, grad_of)


class SharedGradients:
    """The estimate's forward with gradients (and its backward) run as a sweep's shared
    baseline forward: pass it as :func:`~.sweep_cells.prepare_sweep`'s ``shared_forward``
    and to :func:`estimate_cells`, so the clean input runs once, not twice. The forward's
    values are the baseline's: no parameter requires gradients during it, and each swept
    place adds a negative zero, which leaves every value as it was. Where the model gets no
    shared baseline (its kernels follow its hooks), :func:`estimate_cells` runs it."""

    def __init__(self, budget_bytes: int | None = None) -> None:
        self.budget_bytes = budget_bytes
        self.done: _Gradients | None = None

    def __call__(self, ctx: SweepContext) -> tuple[Any, float]:
        self.done = _gradients(ctx, self.budget_bytes)
        return self.done.output, self.done.ms


@dataclass
class Estimates:
    """Every cell's estimate (the grid's shape) and the metric on the clean run it starts from."""

    values: np.ndarray
    clean: float


def estimate_cells(ctx: SweepContext, budget_bytes: int | None = None,
                   shared: SharedGradients | None = None) -> Estimates:
    """Every cell's first-order estimate, in the shape of the grid (see the module
    docstring). Refused (:class:`EstimateRefused`) where the metric has no first-order
    signal, the model is in train mode or its output is not differentiable, or the forward
    with gradients would pass ``budget_bytes`` (default: half the free memory). ``shared``:
    the forward with gradients where it ran as the sweep's baseline (else it runs here)."""
    t0 = time.perf_counter()
    got = shared.done if shared is not None and shared.done is not None else None
    if got is None:
        got = _gradients(ctx, budget_bytes)
    sources = _sources(ctx)
    base = ctx.shared.output if ctx.shared is not None else got.output
    clean = ctx.metric.cell(base, base)
    if ctx.clean is None and ctx.metric.clean is not None:
        ctx.clean = ctx.metric.clean(base)
    est = np.full(tuple(len(v) for v in ctx.coords.values()), np.nan)
    for k, layers in enumerate(ctx.resolved):
        if ctx.should_stop is not None and ctx.should_stop():
            raise Cancelled("the estimate was stopped")
        est[ctx.grid[k]] = clean + _first_order(layers, got.sites, got.grad_of, sources)
    ctx.timings_ms["estimate"] = (time.perf_counter() - t0) * 1e3
    return Estimates(est, clean)


def _metric_tensor(ctx: SweepContext, base: Any, out: Any) -> torch.Tensor:
    assert ctx.metric.grad is not None
    try:
        m = ctx.metric.grad(base, out)
    except NoScores as exc:
        raise EstimateRefused(NOT_DIFFERENTIABLE) from exc
    except PlanError:
        raise
    except Exception as exc:  # a user's metric function that autograd cannot follow
        raise EstimateRefused(f"metric {ctx.metric.name!r} failed on the output with gradients "
                              f"({type(exc).__name__}: {exc}): drop --estimate") from exc
    if not isinstance(m, torch.Tensor) or m.numel() != 1 or not m.requires_grad:
        raise EstimateRefused(
            f"the metric {ctx.metric.name!r} on this model's output is not differentiable "
            "from the swept places (integer outputs, a detector's box lists, a metric that "
            "returns a plain number): drop --estimate and run the cells")
    return m.reshape(())


def _first_order(layers: dict[str, LayerPlan], sites: dict[tuple[int, str], _Site],
                 grad_of: dict[tuple[int, str], list[dict[str, torch.Tensor | None]]],
                 sources: dict[Any, dict[str, list[Any]]]) -> float:
    """``sum <dmetric/da, apply(a) - a>`` over a cell's interventions and their calls."""
    total = 0.0
    for path, lp in layers.items():
        iv = lp.intervention
        if iv is None:
            continue
        key = _site_key(lp)
        site = sites[key]
        src = sources.get(iv.source_key(), {}).get(path) if iv.pre_pass_input() is not None else None
        n_heads = lp.head_site.n_heads if lp.head_site is not None else None
        for call, value in enumerate(site.clean):
            s = src[call] if src is not None and call < len(src) else None
            new = iv.apply(value, InterventionContext(path, call, lp.module, s, n_heads=n_heads))
            before = dict(tensor_leaves(value))
            grads = grad_of[key][call]
            for leaf, t in tensor_leaves(new):
                a = before.get(leaf)
                g = grads.get(leaf)
                if a is None or t is a or g is None:
                    continue
                delta = t.detach().double() - a.double()
                total += float((g.double() * delta.to(g.device)).sum())
    return total


def spearman(a: Sequence[float], b: Sequence[float]) -> float | None:
    """Spearman's rank correlation (ties share their mean rank); ``None`` for fewer than two
    pairs, or where either side is constant or not finite."""
    x = np.asarray(a, dtype=float)
    y = np.asarray(b, dtype=float)
    keep = np.isfinite(x) & np.isfinite(y)
    x, y = x[keep], y[keep]
    if x.size < 2:
        return None
    rx, ry = _ranks(x), _ranks(y)
    if rx.std() == 0 or ry.std() == 0:
        return None
    return float(np.corrcoef(rx, ry)[0, 1])


def _ranks(v: np.ndarray) -> np.ndarray:
    order = np.argsort(v, kind="mergesort")
    ranks = np.empty(v.size)
    ranks[order] = np.arange(v.size, dtype=float)
    for value in np.unique(v):  # ties: their mean rank
        same = v == value
        if same.sum() > 1:
            ranks[same] = ranks[same].mean()
    return ranks


def largest_changes(est: np.ndarray, clean: float, k: int) -> list[int]:
    """The ``k`` cells (row-major positions) whose estimate moves furthest from ``clean``."""
    flat = np.abs(est.reshape(-1) - clean)
    flat = np.where(np.isfinite(flat), flat, -1.0)
    order = np.argsort(-flat, kind="mergesort")  # stable: ties keep grid order
    return [int(i) for i in order[:max(0, min(k, flat.size))]]


def verify_cells(ctx: SweepContext, est: Estimates, k: int,
                 progress: Callable[[int, int], None] | None = None,
                 arrived: Callable[[list[CellValue]], None] | None = None) -> list[CellValue]:
    """Run, for real, the ``k`` cells whose estimate moves furthest from the clean metric,
    with the sweep's own cell runner (batched as its cells are)."""
    if k <= 0:
        return []
    return sweep_cells(ctx, largest_changes(est.values, est.clean, k), progress=progress,
                       arrived=arrived)


__all__ = ["EstimateRefused", "Estimates", "SharedGradients", "check_estimable", "estimate_cells", "largest_changes", "spearman", "verify_cells"]
