"""The pre-pass of activation patching: one forward per source input, shared.

:class:`~hookscope.core.Patch` replaces a layer's output by that layer's
output on another input; :class:`~hookscope.core.MeanAblate` with a
reference input replaces it by the mean of that layer's output on the
reference. Both need a forward on that other input first. Interventions
that name the same input (:meth:`Intervention.source_key`) share ONE
forward, which records the output of every layer that needs it, per call,
and runs without interventions (a clean source run).

The recorded outputs can be cached (``cache``: a dict kept in
:class:`~hookscope.core.Baseline`), so that dragging a parameter in Live mode
does not repeat the source forward.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from ..base.errors import Cancelled, HookscopeError, InputError
from .head_hooks import HeadInputRecorder
from .hook_handles import register_layer_hook
from ..model.inputs import parse_input
from ..base.nested import map_tensors
from ..plan.plan import LayerPlan
from .forward_state import forward, own_copy, to_device


@dataclass
class SourceGroup:
    """One source input and the layers that need its outputs."""

    key: Any
    inputs: Any  # parsed, on the run's device
    paths: list[str] = field(default_factory=list)


class _Recorder:
    """A forward hook that keeps a detached copy of its layer's output for every call."""

    __slots__ = ("outputs",)

    def __init__(self) -> None:
        self.outputs: list[Any] = []

    def __call__(self, module: nn.Module, args: Any, output: Any) -> None:
        # A copy: in-place ops later in the forward (ReLU(inplace=True)) must not change it.
        self.outputs.append(map_tensors(lambda t: t.detach().clone(), output))


def _inert(module: nn.Module, args: Any, output: Any) -> None:
    return None


def source_groups(layers: dict[str, LayerPlan], target_inputs: Any,
                  dev: torch.device, codec: Any = None) -> list[SourceGroup]:
    """Group the layers whose intervention needs a pre-pass by source input, and parse
    each input once (errors come before any forward runs). ``codec``: the model's
    tokenizer, for ``text:`` source inputs (see :func:`~hookscope.core.model.inputs.parse_input`)."""

    groups: dict[Any, SourceGroup] = {}
    for path, lp in layers.items():
        iv = lp.intervention
        if iv is None:
            continue
        src = iv.pre_pass_input()
        if src is None:
            continue
        key = iv.source_key()
        group = groups.get(key)
        if group is None:
            try:
                parsed = parse_input(src, target_inputs, codec) if isinstance(src, str) else src
            except InputError as exc:
                raise InputError(f"layer {path!r}: the {iv.name} input {src!r}: {exc}") from exc
            group = groups[key] = SourceGroup(key, to_device(parsed, dev))
        group.paths.append(path)
    return list(groups.values())


def source_outputs(module: nn.Module, layers: dict[str, LayerPlan], groups: list[SourceGroup],
                   cache: dict[Any, dict[str, list[Any]]] | None = None,
                   outputs: dict[Any, Any] | None = None) -> dict[str, list[Any]]:
    """``{path: [output per call]}`` on each group's input; one forward per group not in ``cache``.

    Every module the plan touches carries a hook in that forward (inert where
    nothing is recorded), so it takes the same kernels as the runs it serves.
    ``outputs``: where given, each forward's model output (on the CPU) is put there under
    its group's key (a sweep normalises by the source run's metric).
    """

    out: dict[str, list[Any]] = {}
    for group in groups:
        known = cache.get(group.key) if cache is not None else None
        # A layer whose heads are picked records its projection's input instead: cached apart.
        slots = {p: _slot(p, layers[p]) for p in group.paths}
        if known is not None and all(slots[p] in known for p in group.paths):
            out.update({p: known[slots[p]] for p in group.paths})
            continue
        recorders: dict[str, Any] = {p: _Recorder() for p in group.paths}
        handles: list[Any] = []
        try:
            for path, lp in layers.items():
                site = lp.head_site
                if path in recorders and site is not None and site.recompute:
                    from ..plan.heads_mha import MhaHeadsRecorder

                    recorders[path] = MhaHeadsRecorder()  # its heads, computed again
                    handles.append(lp.module.register_forward_hook(recorders[path], with_kwargs=True))
                    continue
                if path in recorders and site is not None and site.projection is not None:
                    # Heads: the projection's input on the source input, per call.
                    recorders[path] = HeadInputRecorder()
                    handles.append(site.projection.register_forward_pre_hook(recorders[path]))
                    handles.append(lp.module.register_forward_hook(_inert))
                    continue
                handles.append(register_layer_hook(lp, recorders.get(path, _inert)))
            try:
                model_out = forward(module, own_copy(group.inputs), torch.inference_mode)
            except Cancelled:
                raise
            except HookscopeError as exc:
                raise type(exc)(f"on the source input of {', '.join(group.paths)}: {exc}") from exc
        finally:
            for h in handles:
                h.remove()
        if outputs is not None:
            outputs[group.key] = map_tensors(lambda t: t.detach().cpu(), model_out)
        recorded = {p: r.outputs for p, r in recorders.items()}
        if cache is not None:
            cache[group.key] = {slots[p]: v for p, v in recorded.items()}
        out.update(recorded)
    return out


def _slot(path: str, lp: LayerPlan) -> str:
    """The cache key of what a source forward records for ``lp``: its output, or, when its
    heads are picked at a projection, that projection's input (another tensor)."""
    site = lp.head_site
    apart = site is not None and (site.projection is not None or site.recompute)
    return path + "\x00projection input" if apart else path
