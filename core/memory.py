"""Process memory tuning for keeping activations.

Keeping a layer's output past the forward means the allocator cannot hand
that memory to the next layer, so each kept tensor is fresh memory, and glibc
returning freed memory to the OS between runs makes the next run fault its
pages in again. On a ResNet-18 at batch 8 (one thread) that, not the hooks,
was most of the cost of capturing every layer: 1.19x the plain forward with
glibc's defaults, 1.04x with a high trim threshold and top pad.

Measured and rejected: also fixing the mmap threshold at 32 MiB gave the
same time but a higher peak (+8% for statistics-only runs, from heap
fragmentation), so only the trim threshold and top pad are set (which also
stops glibc's dynamic threshold adjustment).

:func:`keep_freed_memory` applies that setting.
It is process-wide, so the library never calls it on import: the app and the
CLI call it at start-up, and a script may opt in.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import sys

# mallopt parameters from <malloc.h>
_M_TRIM_THRESHOLD = -1
_M_TOP_PAD = -2

#: Freed memory at the top of the heap is kept up to this much.
TRIM_THRESHOLD = 1 << 30
TOP_PAD = 64 << 20

_applied: bool | None = None


def keep_freed_memory() -> bool:
    """Keep freed memory for reuse instead of returning it to the OS (glibc only).

    Returns whether the setting is in force. The cost: the process's resident
    memory does not shrink after a large run; it is reused by the next one.
    """
    global _applied
    if _applied is not None:
        return _applied
    _applied = False
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):  # not glibc (e.g. musl): nothing to tune
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    _applied = bool(mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD) and mallopt(_M_TOP_PAD, TOP_PAD))
    return _applied
