"""Process memory tuning for keeping activations: on by default, with an opt-out.

Keeping a layer's output past the forward means the allocator cannot hand
that memory to the next layer, so each kept tensor is fresh memory. glibc
serves every allocation above its mmap threshold (128 KiB to start with) by
mapping new pages and unmaps them when freed, so every run faults the pages
of its activations in again, one per 4 KiB, and returns them to the OS at
the end. On ResNet-50 at batch 8 (torch's two threads here) that was nearly
all the cost of capturing every layer: hand hooks keeping ``detach()``
references took 1,132 ms against a 648 ms plain forward (299k page faults a
run), Hookscope's every-leaf capture 1,259 ms (358k); with the settings
below 641 and 662 ms, and no faults; with glibc's defaults 761 and 1,029 ms
(121k and 191k faults: its dynamic threshold rises only after some frees).

So the app and the CLI keep freed memory for reuse: their start-up calls
:func:`apply_default` (``import hookscope.core`` changes nothing process-wide;
a script or notebook calls :func:`keep_freed_memory`). What it changes:
allocations up to :data:`MMAP_THRESHOLD` (32 MiB, glibc's largest) come from
the heap instead of fresh mappings, and glibc keeps up to
:data:`TRIM_THRESHOLD` of freed memory at the top of the heap instead of
returning it to the OS, so the process's resident memory does not shrink
after a large run (the next run reuses it). It is process-wide.

That limit is an eighth of the machine's memory, between 1 GiB and 2 GiB
(``mallopt`` takes an ``int``). A fixed 1 GiB was too small on ResNet-50 at
batch 8: its every-leaf capture keeps 0.98 GiB, and once the freed top of the
heap reached 1 GiB (a run keeping a little more, or another case between two
runs), glibc did not trim the excess but everything down to ``M_TOP_PAD``, so
the next run faulted 150-215k pages in again (+0.4 s on a 0.55 s forward). With
2 GiB the same sequence faulted none after warm-up. Opt out with
the environment variable ``HOOKSCOPE_KEEP_FREED_MEMORY=0`` (read by :func:`apply_default`)
or by calling :func:`release_freed_memory`. Nothing happens off glibc
(macOS, Windows, musl).

The trim threshold alone (the first version of this setting) helped where
glibc's own dynamic threshold had risen past the activations' size, as on
ResNet-18 at one thread (1.19x to 1.04x), but setting any of these turns the
dynamic threshold off, which left larger models mapping and unmapping every
activation.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import sys

# mallopt parameters from <malloc.h>
_M_TRIM_THRESHOLD = -1
_M_TOP_PAD = -2
_M_MMAP_THRESHOLD = -3

_INT_MAX = (1 << 31) - 1  # mallopt's value is a C int


def _trim_threshold() -> int:
    """An eighth of physical memory, kept between 1 GiB and the most mallopt takes."""
    try:
        ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):  # sysconf names unknown here
        ram = 0
    return min(_INT_MAX, max(1 << 30, ram // 8))


#: Freed memory at the top of the heap is kept up to this much (see the module docstring).
TRIM_THRESHOLD = _trim_threshold()
TOP_PAD = 64 << 20
#: Allocations up to this size come from the heap, where freed memory is reused
#: (glibc refuses more than 32 MiB on 64-bit systems).
MMAP_THRESHOLD = 32 << 20
# glibc's documented defaults, restored by release_freed_memory().
_GLIBC_TRIM_THRESHOLD = 128 * 1024
_GLIBC_TOP_PAD = 128 * 1024
_GLIBC_MMAP_THRESHOLD = 128 * 1024

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

    The app's and the CLI's default (:func:`apply_default`). Returns whether the setting is
    in force. The cost: the process's resident memory does not shrink after a
    large run; it is reused by the next one.
    """
    global _kept
    if _kept:
        return True
    mallopt = _mallopt()
    _kept = bool(mallopt and mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD)
                 and mallopt(_M_TOP_PAD, TOP_PAD) and mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD))
    return _kept


def release_freed_memory() -> bool:
    """Opt out: give freed memory back to the OS again at glibc's default thresholds.

    Returns whether the thresholds were set (False off glibc). glibc's dynamic
    mmap-threshold adjustment stays off once a threshold was set by hand.
    """
    global _kept
    mallopt = _mallopt()
    ok = bool(mallopt and mallopt(_M_TRIM_THRESHOLD, _GLIBC_TRIM_THRESHOLD)
              and mallopt(_M_TOP_PAD, _GLIBC_TOP_PAD)
              and mallopt(_M_MMAP_THRESHOLD, _GLIBC_MMAP_THRESHOLD))
    _kept = False
    return ok


def freed_memory_kept() -> bool:
    """Whether this process keeps freed memory for reuse (see the module docstring)."""
    return _kept


def opted_out() -> bool:
    """Whether ``HOOKSCOPE_KEEP_FREED_MEMORY`` asks for glibc's own behaviour."""
    return os.environ.get(ENV_VAR, "").strip().lower() in ("0", "false", "no", "off")


def apply_default() -> bool:
    """What the app's and the CLI's start-up do: keep freed memory unless opted out."""
    return False if opted_out() else keep_freed_memory()
