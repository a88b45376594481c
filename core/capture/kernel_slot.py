"""The slot through which a compiled statistics kernel plugs into capture.

The reference path (torch reductions) needs nothing here. A kernel module
(:mod:`hookscope.core.fast.onepass`) is plugged in with :func:`plug` when
``hookscope.core.fast`` is imported, which ``import hookscope.core`` does.
What capture reads from it is the :class:`Kernel` protocol, and nothing else.
"""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np
import torch


class Kernel(Protocol):
    """What the statistics use of a kernel module."""

    #: The compiled extension, or None where it is off (the torch path runs).
    KERNEL: Any

    def one_pass(self, flat: torch.Tensor) -> "tuple[tuple[float, float, float, float], np.ndarray] | None": ...
    def applies(self, t: torch.Tensor) -> bool: ...
    def sample_layout(self, n: int) -> tuple[int, int]: ...
    def threads(self) -> int: ...


_plugged: Kernel | None = None


def plug(kernel: Kernel | None) -> None:
    """Use ``kernel`` for float32 CPU statistics from now on (None: the torch path)."""
    global _plugged
    _plugged = kernel


def plugged() -> Kernel | None:
    """The kernel module in use, or None."""
    return _plugged
