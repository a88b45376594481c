"""The two forwards of a model diff: model A keeps every leaf module's output per call,
model B compares each of its own against A's as it runs and drops it.

Only A's outputs are held (one copy of every leaf's output), never B's: a leaf of B is
compared in its forward hook, while its output is fresh, so B's memory is that of a
plain forward. What A keeps is counted as it is kept, against a budget (half the free
memory of A's device by default): a forward that would pass it stops at that layer with
one line saying so, before the machine runs short (no extra forward is spent measuring
first). A's kept outputs are not copied unless a later in-place op changes them (the
version counters find those, as the engine's captures do, and A runs again copying
just those layers); such a layer that is an eval-mode BatchNorm keeps its input instead,
and B's comparison computes its output again from it (:mod:`.model_diff_remake`).

The plan's interventions apply in both forwards (each model gets its own hooks, with a
patch's source pass on its own weights); a leaf's compared output is the one after its
intervention, the value the rest of the model sees. Every hook is removed on every path.
"""

from __future__ import annotations

import contextlib
from dataclasses import replace
from typing import Any, Callable

import torch
from torch import nn

from ..base.errors import HookscopeError
from ..base.nested import tensor_leaves
from ..base.host_memory import available_memory
from .capture_budget import _human
from ..engine.forward_state import forward, own_copy, restore, snapshot, to_device
from ..engine.hook_handles import HandleStack
from ..engine.hooks import HookSession, version_of
from ..engine.run import stop_points
from ..engine.source_pass import source_groups, source_outputs
from ..model.learned import memory_for
from ..model.module_walk import module_walk
from ..plan.plan import LayerPlan, Plan
from .model_diff_remake import Remade, remake_stats
from .model_diff_result import DiffRow, PairSums

Key = tuple[str, int]


def leaf_paths(module: nn.Module) -> dict[str, nn.Module]:
    """``{path: module}`` of every leaf module (no children), each module once under its
    first path."""
    seen: set[int] = set()
    out: dict[str, nn.Module] = {}
    for path, m in module_walk(module):
        if path and not m._modules and id(m) not in seen:
            seen.add(id(m))
            out[path] = m
    return out


def default_budget(device: torch.device) -> int:
    """Half of the free memory where A's outputs are kept (the device's, or the host's)."""
    if device.type == "cuda":
        free, _total = torch.cuda.mem_get_info(device)
        return free // 2
    return available_memory() // 2


def _floats(out: Any) -> list[torch.Tensor]:
    """The floating (or complex) tensor leaves of a layer's output, detached; a plain tensor
    (most layers) without walking it as a nest."""
    if isinstance(out, torch.Tensor):
        leaves = [out] if out.is_floating_point() or out.is_complex() else []
    else:
        leaves = [t for _, t in tensor_leaves(out) if t.is_floating_point() or t.is_complex()]
    # detached only where there is a graph: under no_grad detach() is a view with autograd
    # bookkeeping, a few microseconds a layer for nothing
    return [t.detach() if t.requires_grad else t for t in leaves]


Kept = list[tuple["torch.Tensor | Remade", "int | None"]]


class _Keeper:
    """Model A's hooks: each leaf's floating tensor leaves per call, in the order they finish.
    A leaf in ``clone`` is copied; one in ``remake`` (``{path: (module, statistics)}``) is
    kept as its input, to be computed again when B compares it (:mod:`.model_diff_remake`)."""

    def __init__(self, budget: int, clone: frozenset[str],
                 remake: dict[str, tuple[nn.Module, tuple[torch.Tensor, ...]]] | None = None):
        self.kept: dict[Key, Kept] = {}
        self.budget = budget
        self.clone = clone
        self.remake = remake or {}
        self.bytes = 0
        self.calls: dict[str, int] = {}

    def hook(self, path: str) -> Callable[[nn.Module, Any, Any], None]:
        clone = path in self.clone
        remake = self.remake.get(path)

        def keep(_m: nn.Module, args: Any, out: Any) -> None:
            call = self.calls.get(path, 0)
            self.calls[path] = call + 1
            remade = Remade.of(remake[0], remake[1], args, out) if remake is not None else None
            leaves: Kept = []
            if remade is not None:
                self.bytes += remade.nbytes
                leaves.append((remade, None))
            else:
                for t in _floats(out):
                    self.bytes += t.element_size() * t.numel()
                    leaves.append((t.clone(), None) if clone or remake is not None
                                  else (t, version_of(t)))
            if self.bytes > self.budget:
                raise HookscopeError(
                    f"diff: keeping model A's layer outputs passes the memory budget of "
                    f"{_human(self.budget)} at layer {path!r} ({_human(self.bytes)} so far); "
                    "give a shorter or smaller input, or raise the budget (--memory-budget SIZE)")
            self.kept[(path, call)] = leaves
        return keep

    def stale(self) -> tuple[set[str], set[str]]:
        """The layers a later in-place op overwrote (to copy), and the remade ones whose
        input or statistics changed in place (to copy instead of remaking)."""
        stale: set[str] = set()
        no_remake: set[str] = set()
        for (path, _), leaves in self.kept.items():
            for t, v in leaves:
                if isinstance(t, Remade):
                    if t.stale():
                        no_remake.add(path)
                elif v is not None and version_of(t) != v:
                    stale.add(path)
        return stale, no_remake


def _value(kept: "torch.Tensor | Remade", path: str) -> torch.Tensor:
    return kept.value(path) if isinstance(kept, Remade) else kept


class _Comparer:
    """Model B's hooks: each call compared against A's same call at once, then dropped."""

    def __init__(self, kept: dict[Key, Kept], directions: dict[str, nn.Module]):
        self.kept = kept
        self.rows: dict[Key, DiffRow] = {}
        self.calls: dict[str, int] = {}
        self.directions = directions
        self.vectors: dict[str, torch.Tensor] = {}

    def hook(self, path: str) -> Callable[[nn.Module, Any, Any], None]:
        def compare(_m: nn.Module, _args: Any, out: Any) -> None:
            call = self.calls.get(path, 0)
            self.calls[path] = call + 1
            theirs = self.kept.get((path, call))
            if theirs is None:
                return
            ours = _floats(out)
            if not ours and not theirs:  # no floating output (token ids, masks): no row
                return
            sums = PairSums()
            if len(ours) != len(theirs):
                sums.note = (f"outputs differ in structure: {len(theirs)} floating tensors in "
                             f"A, {len(ours)} in B")
            else:
                for (a, _), b in zip(theirs, ours):
                    sums.add(_value(a, path), b)
            self.rows[(path, call)] = sums.row(path, call)
            if call == 0 and path in self.directions and ours and sums.note is None:
                self.vectors[path] = mean_difference(_value(theirs[0][0], path), ours[0])
        return compare


def mean_difference(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``b - a`` as one vector over the last axis (the axis ``add:``/``project:`` act on): at
    the last position where the output has positions (3 or more axes: ``(batch, positions,
    features)``), averaged over every leading axis (the batch)."""
    d = b.to(device=a.device, dtype=torch.float64) - a.double()
    if d.dim() >= 3:
        d = d[..., -1, :]
    return d.reshape(-1, d.shape[-1]).mean(0).float().cpu()


def _intervention_layers(module: nn.Module, plan: Plan) -> dict[str, LayerPlan]:
    """The plan's intervened layers on ``module``, capturing nothing (the diff's own hooks
    read every leaf)."""
    if not plan.all_interventions():
        return {}
    return {p: replace(lp, capture=False) for p, lp in plan.resolve(module).items()
            if lp.intervention is not None}


@contextlib.contextmanager
def hooked(module: nn.Module, plan: Plan, x: Any, dev: torch.device, codec: Any,
           leaves: dict[str, nn.Module], hooks: dict[str, Callable],
           should_stop: Callable[[], bool] | None):
    """``module`` with the plan's interventions, then ``hooks`` (``{leaf path: hook}``, on
    ``leaves``, its :func:`leaf_paths`; registered after the interventions, so they read
    the intervened outputs) and the stop points; every one removed on the way out."""
    layers = _intervention_layers(module, plan)
    groups = source_groups(layers, x, dev, codec) if layers else []
    sources = source_outputs(module, layers, groups) if groups else None
    handles = HandleStack()
    with HookSession(layers, keep_tensors=False, sources=sources), \
            stop_points(module, should_stop):
        try:
            for path, hook in hooks.items():
                handles.add(leaves[path], hook)
            yield
        finally:
            handles.remove()


def run_a(module: nn.Module, x: Any, plan: Plan, dev: torch.device, codec: Any,
          budget: int | None, should_stop: Callable[[], bool] | None) -> tuple[Any, _Keeper]:
    """Model A's forward with every leaf kept; its output and the keeper. Re-run, copying
    the layers a later in-place op changed, when there are any (and once more, copying
    them, where a remade layer's input or statistics changed)."""
    memory = memory_for(module)
    budget = default_budget(dev) if budget is None else budget
    start = snapshot(module)
    leaves = leaf_paths(module)
    intervened = set(_intervention_layers(module, plan))

    def keeper_now() -> _Keeper:
        remake = {}
        for p in memory.victims - memory.no_remake - intervened:
            stats = remake_stats(leaves[p]) if p in leaves else None
            if stats is not None:
                remake[p] = (leaves[p], stats)
        return _Keeper(budget, frozenset(memory.victims), remake)

    keeper = keeper_now()
    try:
        # at most once a model each: the victims found, then the remade ones that cannot be
        for attempt in range(3):
            with hooked(module, plan, x, dev, codec, leaves,
                        {p: keeper.hook(p) for p in leaves},
                        should_stop):
                out = forward(module, own_copy(x), torch.no_grad, memory)
            stale, no_remake = keeper.stale()
            if not (stale or no_remake) or attempt == 2:
                return out, keeper
            memory.victims |= stale | no_remake
            memory.no_remake |= no_remake
            restore(module, start)
            keeper = keeper_now()
    finally:
        restore(module, start)
    raise AssertionError("unreachable")  # pragma: no cover


def run_b(module: nn.Module, x: Any, plan: Plan, dev: torch.device, codec: Any,
          kept: dict[Key, Kept], directions: tuple[str, ...],
          should_stop: Callable[[], bool] | None) -> tuple[Any, _Comparer, list[str]]:
    """Model B's forward, each leaf compared with A's as it runs; its output, the comparer
    and the leaf paths B has."""
    leaves = leaf_paths(module)
    comparer = _Comparer(kept, {p: leaves[p] for p in directions if p in leaves})
    start = snapshot(module)
    try:
        with hooked(module, plan, x, dev, codec, leaves,
                    {p: comparer.hook(p) for p in leaves},
                    should_stop):
            out = forward(module, own_copy(x), torch.inference_mode, memory_for(module))
    finally:
        restore(module, start)
    return out, comparer, list(leaves)

