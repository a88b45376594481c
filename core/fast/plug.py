"""What ``hookscope.core.fast`` plugs into capture's door (:mod:`hookscope.core.engine.fast_slot`).

:data:`SPEEDUPS` gives capture the compiled statistics kernel (:mod:`.onepass`)
and the hook session of each forward: a :class:`~.session.FastSession`, or on
a model's first run that keeps captures a :class:`~.inplace_guard.GuardedSession`,
which learns the in-place victims in the same forward instead of a second one.
"""

from __future__ import annotations

from typing import Any

from torch import nn

from ..engine.fast_slot import Kernel
from ..engine.hooks import HookSession
from . import onepass
from .inplace_guard import GuardedSession, worth_guarding
from .session import FastSession


class _Speedups:
    """The :class:`~hookscope.core.engine.fast_slot.Speedups` of this floor."""

    @property
    def kernel(self) -> Kernel:
        return onepass  # its one_pass() declines where the kernel is off or does not apply

    def session(self, module: nn.Module, layers: dict[str, Any], memory: Any, *,
                keep_tensors: bool, clone_paths: Any, sources: Any, baseline: Any,
                may_learn: bool, remake: bool, modules: Any) -> HookSession:
        learn = (may_learn and keep_tensors and not set(layers) <= memory.watched
                 and worth_guarding(module, memory))
        return (GuardedSession if learn else FastSession)(
            layers, keep_tensors=keep_tensors, clone_paths=clone_paths, sources=sources,
            baseline=baseline, no_remake=memory.no_remake if remake else layers)


SPEEDUPS = _Speedups()
