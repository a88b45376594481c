"""Speed-ups the reference path does not need, plugged into capture's door
(:mod:`hookscope.core.engine.fast_slot`) when this package is imported, which
``import hookscope.core`` does: the compiled one-pass statistics kernel, hooks
armed by writing torch's hook dicts, raw captures laid out after the forward,
in-place victims learned under a dispatch guard in the first run's own forward,
eval-mode BatchNorm victims computed again on first read instead of copied.
``HOOKSCOPE_FAST=0`` switches them off (read at each run). Also the allocator
setting the app and CLI apply at start-up.

This file is the floor's face: widgets/ and app/ import these names from
here, never from a module inside (tests/test_floors.py checks it).
"""

from ..engine import fast_slot as _fast_slot
from .memory import apply_default
from .plug import SPEEDUPS as _SPEEDUPS

# From here on capture's runs may use them (capture never imports this floor).
_fast_slot.plug(_SPEEDUPS)

__all__ = ["apply_default"]
