"""The compiled one-pass summary of a float32 activation, where it was built.

``_onepass.c`` reads each value once for min, max, sum and sum of squares and
copies the histogram sample in the same call, where the pure-torch path
(:func:`hookscope.core.engine.stats._moments`) needs ``aminmax``, ``sum`` and ``dot``
plus a NumPy gather. The extension is optional: an install without a C
compiler still works, on the torch path, and gives the same numbers (the
tests run both).

``HOOKSCOPE_NO_ONEPASS=1`` in the environment switches it off (to compare the
two paths, or to rule it out when something looks wrong).
"""

from __future__ import annotations

import math
import os

import numpy as np
import torch

from ..views.hist_sample import HIST_SAMPLE, SAMPLE_RUN, sample_runs

try:
    from . import _onepass as _ext  # type: ignore[attr-defined]
except ImportError:  # built without a compiler, or not built yet
    _ext = None


def _shares_torch_threads() -> bool:
    """True when the extension's OpenMP is the runtime torch's ops run on.

    The extension links ``libgomp.so.1``, the soname torch's wheels ship, so
    the loader gives it torch's copy. A torch built on another OpenMP (Intel's
    ``libiomp5``, say) would leave two thread pools fighting for the cores;
    then the extension runs on one thread."""
    if _ext is None or not _ext.has_openmp():
        return False
    try:
        with open("/proc/self/maps") as f:
            libs = {line.split()[-1] for line in f if "gomp" in line or "iomp" in line}
    except OSError:  # not Linux: no way to tell, stay on one thread
        return False
    return len(libs) == 1


def _enabled() -> bool:
    return (_ext is not None and _ext.uses_simd()
            and os.environ.get("HOOKSCOPE_NO_ONEPASS", "") in ("", "0"))


#: The kernel, or None where the torch path runs (no build, no AVX2, switched off).
KERNEL = _ext if _enabled() else None
#: The kernel may use torch's threads (see _shares_torch_threads).
THREADED = _shares_torch_threads()


def which() -> str:
    """Which path summarises float32 CPU tensors, in words (for reports and bug notes)."""
    if KERNEL is None:
        why = ("not built" if _ext is None else
               "no AVX2/FMA on this CPU" if not _ext.uses_simd() else "HOOKSCOPE_NO_ONEPASS set")
        return f"torch reductions ({why})"
    return f"one-pass kernel ({'torch threads' if THREADED else 'one thread'})"


def threads() -> int:
    """Threads the kernel may use now: torch's own count (it follows
    ``torch.set_num_threads``) where it shares torch's OpenMP, else one."""
    return torch.get_num_threads() if THREADED else 1


def summary_f32(flat: torch.Tensor, runs: int, step: int, run_len: int
                ) -> tuple[tuple[float, float, float, float], np.ndarray]:
    """``((min, max, sum, sum of squares), sample)`` of a contiguous 1-D float32 CPU
    tensor, read once. The sample is a float32 copy of ``flat`` when ``runs == 0``,
    else of ``runs`` runs of ``run_len`` values, ``step`` apart. Min and max are
    only meaningful when the sums are finite (see ``_onepass.c``)."""
    assert KERNEL is not None
    mn, mx, total, sumsq, raw = KERNEL.summary_f32(flat.data_ptr(), flat.numel(), threads(),
                                                   runs, step, run_len, 0)
    return (mn, mx, total, sumsq), np.frombuffer(raw, dtype=np.float32)


def applies(t: torch.Tensor) -> bool:
    """Whether the kernel can read ``t`` where it lies: contiguous float32 on the CPU."""
    return t.dtype is torch.float32 and t.is_cpu and t.is_contiguous()


def sample_layout(n: int) -> tuple[int, int]:
    """``(runs, step)`` of the histogram sample of ``n`` values as the kernel takes
    them: ``(0, 0)`` (every value) up to :data:`HIST_SAMPLE`, else the sample's runs."""
    return sample_runs(n) if n > HIST_SAMPLE else (0, 0)


def one_pass(flat: torch.Tensor) -> "tuple[tuple[float, float, float, float], np.ndarray] | None":
    """``stats._moments`` and a copy of ``hist_sample.hist_sample`` of ``flat`` from one read by
    the kernel; ``None`` where it does not apply (no kernel, see :func:`applies`) or
    the data holds a NaN, an infinity or a value whose square overflows float32: the
    torch path then counts and handles those exactly."""
    if KERNEL is None or not applies(flat):
        return None
    got, sample = summary_f32(flat, *sample_layout(flat.numel()), SAMPLE_RUN)
    if not all(map(math.isfinite, got)):
        return None
    return got, sample


_PAIR_DTYPES = {torch.float32: False, torch.bfloat16: True}


def pair_sums(a: torch.Tensor, b: torch.Tensor
              ) -> "tuple[float, float, float, float, float] | None":
    """``(max |a - b|, sum (a - b)², sum a², sum b², sum a·b)`` of two tensors of one shape,
    each read once by the kernel, the difference taken in float32; ``None`` where it does
    not apply (no kernel, not both contiguous on the CPU in float32 or bfloat16) or a sum
    is not finite (a NaN, an infinity, an overflow): the torch path handles those."""
    if KERNEL is None or not (a.is_cpu and b.is_cpu and a.is_contiguous() and b.is_contiguous()
                              and a.numel() == b.numel()):
        return None
    abf, bbf = _PAIR_DTYPES.get(a.dtype), _PAIR_DTYPES.get(b.dtype)
    if abf is None or bbf is None:
        return None
    got = KERNEL.pair_sums(a.data_ptr(), abf, b.data_ptr(), bbf, a.numel(), threads())
    return got if all(map(math.isfinite, got)) else None
