"""Speed-ups the reference path does not need: the compiled one-pass kernel (plugged into
capture's kernel slot when this package is imported) and the allocator setting the app
and CLI apply at start-up.

This file is the floor's face: widgets/ and app/ import these names from
here, never from a module inside (tests/test_floors.py checks it).
"""

from ..capture import kernel_slot as _kernel_slot
from . import onepass as _onepass_module

from .memory import apply_default

# The compiled kernel serves capture's statistics from here on (capture never
# imports this floor; see capture/kernel_slot.py).
_kernel_slot.plug(_onepass_module)

__all__ = ["apply_default"]
