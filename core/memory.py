"""Process memory tuning for keeping activations: on by default, with an opt-out.

Keeping a layer's output past the forward means the allocator cannot hand
that memory to the next layer, so each kept tensor is fresh memory, and glibc
returning freed memory to the OS between runs makes the next run fault its
pages in again. On a ResNet-18 at batch 8 (one thread) that, not the hooks,
was most of the cost of capturing every layer: 1.19x the plain forward with
glibc's defaults, 1.04x with a high trim threshold and top pad.

So ``import hookscope.core`` keeps freed memory for reuse (a user in a
notebook gets the fast path without knowing about it). What it changes:
glibc keeps up to :data:`TRIM_THRESHOLD` of freed memory at the top of the
heap instead of returning it to the OS, so the process's resident memory
does not shrink after a large run (the next run reuses it). It is
process-wide. Opt out with the environment variable
``HOOKSCOPE_KEEP_FREED_MEMORY=0`` (read at import) or by calling
:func:`release_freed_memory`. Nothing happens off glibc (macOS, Windows, musl).

Measured and rejected: also fixing the mmap threshold at 32 MiB gave the
same time but a higher peak (+8% for statistics-only runs, from heap
fragmentation), so only the trim threshold and top pad are set (which also
stops glibc's dynamic threshold adjustment).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import sys

# mallopt parameters from <malloc.h>
_M_TRIM_THRESHOLD = -1
_M_TOP_PAD = -2

#: Freed memory at the top of the heap is kept up to this much.
TRIM_THRESHOLD = 1 << 30
TOP_PAD = 64 << 20
# glibc's documented defaults, restored by release_freed_memory().
_GLIBC_TRIM_THRESHOLD = 128 * 1024
_GLIBC_TOP_PAD = 128 * 1024

#: The environment variable that opts out of the default (``0``, ``false``, ``no``, ``off``).
ENV_VAR = "HOOKSCOPE_KEEP_FREED_MEMORY"

_kept = False


def _mallopt():
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        fn = libc.mallopt
    except (OSError, AttributeError):  # not glibc (e.g. musl): nothing to tune
        return None
    fn.argtypes = [ctypes.c_int, ctypes.c_int]
    fn.restype = ctypes.c_int
    return fn


def keep_freed_memory() -> bool:
    """Keep freed memory for reuse instead of returning it to the OS (glibc only).

    The library's default (applied on import). Returns whether the setting is
    in force. The cost: the process's resident memory does not shrink after a
    large run; it is reused by the next one.
    """
    global _kept
    if _kept:
        return True
    mallopt = _mallopt()
    _kept = bool(mallopt and mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD)
                 and mallopt(_M_TOP_PAD, TOP_PAD))
    return _kept


def release_freed_memory() -> bool:
    """Opt out: give freed memory back to the OS again at glibc's default thresholds.

    Returns whether the thresholds were set (False off glibc). glibc's dynamic
    mmap-threshold adjustment stays off once a threshold was set by hand.
    """
    global _kept
    mallopt = _mallopt()
    ok = bool(mallopt and mallopt(_M_TRIM_THRESHOLD, _GLIBC_TRIM_THRESHOLD)
              and mallopt(_M_TOP_PAD, _GLIBC_TOP_PAD))
    _kept = False
    return ok


def freed_memory_kept() -> bool:
    """Whether this process keeps freed memory for reuse (see the module docstring)."""
    return _kept


def opted_out() -> bool:
    """Whether ``HOOKSCOPE_KEEP_FREED_MEMORY`` asks for glibc's own behaviour."""
    return os.environ.get(ENV_VAR, "").strip().lower() in ("0", "false", "no", "off")


def apply_default() -> bool:
    """What ``import hookscope.core`` does: keep freed memory unless opted out."""
    return False if opted_out() else keep_freed_memory()
