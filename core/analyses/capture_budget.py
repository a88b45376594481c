"""Whether the captured tensors fit in memory: statistics-only when they would not.

Keeping every captured layer's output of a large model (a 7B language model
at a long prompt) takes more host memory than the machine has, while its
statistics take a few hundred bytes a layer. :func:`fit_plan_to_budget`
measures what a plan would keep, with one forward that keeps nothing, and
turns the plan to statistics-only with a note when that passes the budget.
The CLI asks for it when a model is spread by a device map or a budget is
given (``--memory-budget``); a script or the window may call it too.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import torch
from torch import nn

from ..base.host_memory import available_memory
from ..base.nested import tensor_leaves
from ..plan.plan import Plan
from ..base.call_args import call_model
from ..engine.forward_state import own_copy
from ..engine.capture_record import CaptureRecord
from ..engine.hook_handles import register_layer_hook


@dataclass(frozen=True)
class CaptureDecision:
    """What :func:`fit_plan_to_budget` chose, and why."""

    plan: Plan
    kept_bytes: int
    budget: int
    note: str | None = None  # set when statistics only were chosen, saying why


def default_budget() -> int:
    """Half of the memory this process may still take (the host's free memory, or the room
    under a container's limit): kept captures must leave room for the model's own work."""
    return available_memory() // 2


def kept_bytes(module: nn.Module, inputs: Any, plan: Plan) -> int:
    """Bytes a plan's kept captures would take, from one forward that keeps nothing.

    Counts what a comparison keeps per call of every captured layer: every
    tensor leaf of its output, once more where the layer has an intervention (the
    values before it), and once more where records also keep the baseline
    run's value of the same call.
    """

    layers = plan.resolve(module)
    baseline_copy = int("baseline_tensor" in CaptureRecord.__slots__)
    total = 0

    def counter(copies: int):
        def hook(_m: nn.Module, _a: Any, out: Any) -> None:
            nonlocal total
            for _, t in tensor_leaves(out):  # every leaf of a nested output is kept
                total += t.element_size() * t.numel() * copies
        return hook

    handles = [register_layer_hook(lp, counter(1 + int(lp.intervention is not None) + baseline_copy))
               for lp in layers.values() if lp.capture]
    try:
        with torch.inference_mode():
            call_model(module, own_copy(inputs))
    finally:
        for h in handles:
            h.remove()
    return total


def choose_capture_mode(plan: Plan, kept: int, budget: int) -> CaptureDecision:
    """Statistics-only (with a note) when ``kept`` bytes would pass ``budget``."""
    if not plan.keep_tensors or kept <= budget:
        return CaptureDecision(plan, kept, budget)
    note = (f"statistics only: keeping the captured tensors would take {_human(kept)}, over the "
            f"memory budget of {_human(budget)}; statistics are still computed for every "
            "captured layer (raise the budget with --memory-budget SIZE to keep the tensors)")
    return CaptureDecision(replace(plan, keep_tensors=False), kept, budget, note)


def fit_plan_to_budget(module: nn.Module, inputs: Any, plan: Plan,
                       budget: int | None = None) -> CaptureDecision:
    """Measure what ``plan`` would keep and choose statistics-only when it passes
    ``budget`` (default :func:`default_budget`). A plan that keeps nothing costs no forward."""
    budget = default_budget() if budget is None else budget
    if not plan.keep_tensors or not plan.capture:
        return CaptureDecision(plan, 0, budget)
    return choose_capture_mode(plan, kept_bytes(module, inputs, plan), budget)


def _human(n: int) -> str:
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} B"
