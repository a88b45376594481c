"""The shared baseline forward of a sweep, and what it notes for batching.

:func:`make_baseline` runs the baseline :func:`~.run.compare` would run for a sweep's first
cell, once, for every cell to share. Where cells may be batched it also notes every leaf
module's output size (the batch budget's estimate of one row's working set) and the leaf
shapes each hooked module gives on one input (which leaves a row hook may take as batched,
see :mod:`.sweep_batch`). Another forward of the same input may stand in for the baseline's
(an estimate's forward with gradients, :mod:`.sweep_estimate`): the same notes are taken
during it, and its output is the baseline's.
"""

from __future__ import annotations

from typing import Any, Callable

import torch
from torch import nn

from ..base.nested import tensor_leaves
from ..plan.plan import LayerPlan
from ..engine.forward_state import restore, snapshot
from ..engine.run import Baseline, _run_resolved, stop_points
from .sweep_batch import leaf_bytes, row_target


class _Largest:
    """A forward hook noting the bytes of each leaf module's output (the batch budget's
    estimate of one row's working set)."""

    def __init__(self, out: list[int]) -> None:
        self.out = out

    def __call__(self, module: nn.Module, args: Any, output: Any) -> None:
        self.out.append(leaf_bytes(output))


class _Shapes:
    """A forward hook (or, at a head site, a pre-hook on the projection) noting the shape of
    every tensor leaf a batched forward's row hook will see, per call: which leaves are
    batched along dim 0 is read against these, not guessed from sizes."""

    def __init__(self) -> None:
        self.calls: list[dict[str, tuple[int, ...]]] = []

    def __call__(self, module: nn.Module, args: Any, output: Any = None) -> None:
        seen = output if output is not None else (args[0] if args else None)
        self.calls.append({k: tuple(t.shape) for k, t in tensor_leaves(seen)})


def make_baseline(module: nn.Module, x: Any, resolved: list[dict[str, LayerPlan]],
                   dev: torch.device, should_stop: Callable[[], bool] | None,
                   largest: list[int] | None,
                   shapes: dict[tuple[int, bool], list[dict[str, tuple[int, ...]]]],
                   run: Callable[[], tuple[Any, float]] | None = None) -> Baseline:
    """The baseline forward :func:`compare` would run for the first cell (no captures, inert
    hooks on its hooked modules), for cells to share. When batching is possible (a model
    whose kernels do not follow its hooks, so extra hooks change nothing), ``largest``
    collects every leaf module's output size and ``shapes`` the leaf shapes every hooked
    module of every cell gives (see :class:`~.sweep_batch.RowHooks`). ``run``: a forward of
    the same input, on a model whose kernels do not follow its hooks, standing in for the
    baseline's: it returns the output (detached, on the CPU) and its milliseconds, and the
    notes above are taken during it."""
    layers = resolved[0]
    clean = {p: LayerPlan(p, lp.module, at_input=lp.at_input, mid_block=lp.mid_block)
             for p, lp in layers.items()}
    start = snapshot(module)
    handles = []
    try:
        if largest is not None:
            note = _Largest(largest)
            handles = [m.register_forward_hook(note) for m in module.modules()
                       if next(m.children(), None) is None]
            recorders: dict[tuple[int, bool], _Shapes] = {}
            for cell in resolved:
                for lp in cell.values():
                    target, pre = row_target(lp)
                    if (id(target), pre) in recorders:
                        continue
                    rec = recorders[(id(target), pre)] = _Shapes()
                    handles.append(target.register_forward_pre_hook(rec) if pre
                                   else target.register_forward_hook(rec))
        with stop_points(module, should_stop):
            if run is None:
                b = _run_resolved(module, x, clean, False, dev, start=start)
                output, ms, captures = b.output, b.forward_ms, b.captures
            else:
                (output, ms), captures = run(), {}
        if largest is not None:
            shapes.update({key: rec.calls for key, rec in recorders.items()})
    finally:
        for h in handles:
            h.remove()
        restore(module, start)
    return Baseline(output, ms, str(dev), frozenset(layers), should_stop is not None,
                    captures=captures, captured=frozenset(), keep_tensors=False)
