"""The forward pre-hooks that act on attention heads at an output projection's input.

:func:`~hookscope.core.plan.heads.head_site` says where: the projection's input is
the heads side by side, (..., n_heads * head_dim). The pre-hook hands it to the
layer's intervention with ``n_heads`` in the context, so the base narrows it to
the picked heads (:mod:`hookscope.core.plan.aim`), and replaces the projection's
input. Its source (a patch's, a reference mean's) is the projection's input of
the same call on the source input (:func:`record_head_inputs`).
"""

from __future__ import annotations

from typing import Any

from torch import nn

from .hook_handles import Arming
from ..plan.intervention_base import InterventionContext
from ..base.nested import map_tensors
from ..plan.heads_mha import MhaHeadHook


class _HeadHook:
    """Applies one layer's intervention to its output projection's first input, per call."""

    __slots__ = ("path", "layer", "intervention", "n_heads", "sources", "calls", "tally")

    def __init__(self, lp: Any, sources: list[Any] | None, tally: Any = None) -> None:
        self.path = lp.path
        self.layer = lp.module
        self.intervention = lp.intervention
        self.n_heads = lp.head_site.n_heads
        self.sources = sources
        self.calls = 0
        self.tally = tally  # the layer's receipt counts (core/engine/receipts.py)

    def __call__(self, module: nn.Module, args: Any) -> Any:
        if not args:
            return None
        call = self.calls
        self.calls += 1
        src = self.sources[call] if self.sources is not None and call < len(self.sources) else None
        ctx = InterventionContext(self.path, call, self.layer, src, n_heads=self.n_heads)
        new = self.intervention.apply(args[0], ctx)
        if self.tally is not None:
            self.tally.add(args[0], new)
        return (new, *args[1:])


def add_head_hook(hooks: Arming, lp: Any, sources: list[Any] | None, tally: Any = None) -> None:
    """Add the pre-hook of ``lp``'s heads on its output projection to ``hooks`` (for an
    nn.MultiheadAttention: a forward hook computing its output again, run before the
    layer's capture hook). ``tally`` counts what the heads' change did, for the receipt."""
    site = lp.head_site
    if site.recompute:
        hooks.keep(lp.module.register_forward_hook(
            MhaHeadHook(lp.path, lp.intervention, site.n_heads, sources, tally),
            with_kwargs=True, prepend=True))
        return
    hooks.add_pre(site.projection, _HeadHook(lp, sources, tally))


class HeadInputRecorder:
    """A pre-hook keeping a detached copy of a projection's first input, every call."""

    __slots__ = ("outputs",)

    def __init__(self) -> None:
        self.outputs: list[Any] = []

    def __call__(self, module: nn.Module, args: Any) -> None:
        if args:
            self.outputs.append(map_tensors(lambda t: t.detach().clone(), args[0]))
