"""The door through which the optional speed-ups of ``hookscope.core.fast`` plug into capture.

The engine in this floor is complete and correct on its own (the *reference
path*): hooks registered with ``register_forward_hook`` and removed through
their handles, kept captures checked by their version counters (a layer whose
capture a later in-place op overwrote is copied from then on), statistics
by torch reductions. ``hookscope.core.fast`` makes some of that cheaper and
plugs in here when it is imported (``import hookscope.core`` does), through
two interfaces and nothing else:

* :class:`Kernel`: a compiled one-pass reduction the statistics use for
  contiguous float32 CPU tensors (:mod:`.stats`), and the model diff for a pair of
  float32/bfloat16 CPU tensors;
* :class:`Speedups`: a factory of the :class:`~.hooks.HookSession` a run uses
  (:mod:`.run`): a subclass may arm its hooks, keep and summarise its captures
  and learn the model's in-place victims its own way, as long as its records
  equal the reference path's.

What such a session builds on is public in the engine: :class:`~.hooks.HookSession`
(its methods marked "a speed-up overrides it"), :class:`~.hooks.LayerHook`,
:class:`~.pending_capture.PendingCapture`, :class:`~.hook_handles.Arming`,
:class:`~.capture_record.CaptureRecord` (``of_stats``, ``of_kept``, ``of_recipe``,
``remade_by``) and the layout of a summary vector (:data:`~.stats.N_SCALARS`,
:class:`~.stats.Unbinned`, :func:`~.stats.hist_range`). Nothing with a leading
underscore is imported from here (tests/test_floors.py checks it).

``HOOKSCOPE_FAST=0`` (also ``false``, ``no``, ``off``) in the environment
switches both off; it is read each time a run or a summary asks
(:func:`active`), so a test or a notebook can flip it between runs.
"""

from __future__ import annotations

import os
from typing import Any, Protocol

import numpy as np
import torch

#: The environment variable that switches the speed-ups off.
FAST_ENV = "HOOKSCOPE_FAST"


class Kernel(Protocol):
    """What the statistics use of a kernel module."""

    def one_pass(self, flat: torch.Tensor) -> "tuple[tuple[float, float, float, float], np.ndarray] | None":
        """``((min, max, sum, sum of squares), histogram sample)`` of a 1-D tensor read once,
        or ``None`` where the torch reductions must do it (see ``stats._summary_eager``)."""
        ...

    def pair_sums(self, a: torch.Tensor, b: torch.Tensor
                  ) -> "tuple[float, float, float, float, float] | None":
        """``(max |a - b|, sum (a - b)², sum a², sum b², sum a·b)`` of two tensors of one
        shape read once, or ``None`` where torch must compute them (the model diff's
        per-layer comparison)."""
        ...


class Speedups(Protocol):
    """What a run uses of the speed-ups: its statistics kernel and its hook session."""

    @property
    def kernel(self) -> Kernel | None: ...

    def session(self, module: torch.nn.Module, layers: dict[str, Any], memory: Any, *,
                keep_tensors: bool, clone_paths: Any, sources: Any, baseline: Any,
                may_learn: bool, remake: bool, modules: Any) -> Any:
        """The :class:`~.hooks.HookSession` (or a subclass) of one forward of ``module``.

        ``memory``: the model's :class:`~hookscope.core.model.learned.ModelMemory`;
        ``may_learn``: this forward may watch for in-place victims as it runs;
        ``remake``: captures may be computed again from their input on first read."""
        ...


_plugged: Speedups | None = None


def plug(speedups: Speedups | None) -> None:
    """Use ``speedups`` from now on (None: the reference path only)."""
    global _plugged
    _plugged = speedups


def switched_off() -> bool:
    """Whether ``HOOKSCOPE_FAST`` asks for the reference path."""
    return os.environ.get(FAST_ENV, "").strip().lower() in ("0", "false", "no", "off")


def active() -> Speedups | None:
    """The plugged speed-ups, or None where there are none or they are switched off."""
    return None if _plugged is None or switched_off() else _plugged


def kernel() -> Kernel | None:
    """The statistics kernel in use, or None (torch reductions)."""
    fast = active()
    return fast.kernel if fast is not None else None
