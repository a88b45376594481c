"""Peak memory of one benchmark case, measured in a fresh process.

Usage: ``python -m bench.memory_case MODEL CASE [--quick]``; prints one JSON line.

``tracemalloc`` does not see torch's allocations, so memory is read from the
kernel: the process builds the model, runs the case once (warm-up: the
allocator's and oneDNN's caches, and Hookscope's learning of in-place victims),
drops the result, hands freed heap back to the OS (``malloc_trim``), takes
the resident set as the baseline, resets the kernel's high-water mark
(``/proc/self/clear_refs``) and runs the case again, keeping its result. The
figure is the high-water mark minus the baseline: what the case costs on
top of the built model. Where the reset is unavailable (not Linux), it falls
back to ``ru_maxrss`` minus the RSS before the first run.
"""

from __future__ import annotations

import argparse
import ctypes
import gc
import json
import resource
import sys
from hookscope.core.fast.memory import apply_default


def _status_kib() -> dict[str, int]:
    out = {}
    try:
        with open("/proc/self/status") as f:
            for line in f:
                key, _, val = line.partition(":")
                if key in ("VmRSS", "VmHWM"):
                    out[key] = int(val.split()[0])
    except OSError:
        pass
    return out


def _reset_peak() -> bool:
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def _trim() -> None:
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


def measure(model: str, case: str, quick: bool) -> dict:
    import os

    import torch

    from .cases import model_cases
    from .models import build

    # The library's memory default follows HOOKSCOPE_KEEP_FREED_MEMORY from the parent.
    if os.environ.get("BENCH_THREADS"):
        torch.set_num_threads(int(os.environ["BENCH_THREADS"]))
    bm = build(model, quick)
    cases = {c.name: c for c in model_cases(bm)}
    if case not in cases:  # a peer
        from .competitors import competitor_cases

        cases.update((c.name, c) for c in competitor_cases(bm)[0])
    c = cases[case]
    before = _status_kib().get("VmRSS", 0)
    c.fn()  # warm-up; result dropped
    gc.collect()
    _trim()
    base = _status_kib()
    if base and _reset_peak():
        out = c.fn()
        peak_kib = _status_kib()["VmHWM"] - base["VmRSS"]
        method = "VmHWM after clear_refs, fresh process"
    else:
        out = c.fn()
        peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
        method = "ru_maxrss, fresh process"
    captured = c.captured_bytes(out) if c.captured_bytes else 0
    return {"model": model, "case": case, "peak_above_model_mib": peak_kib / 1024,
            "captured_mib": captured / 2**20, "method": method}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.memory_case")
    ap.add_argument("model")
    ap.add_argument("case")
    ap.add_argument("--quick", action="store_true")
    a = ap.parse_args(argv)
    apply_default()  # as the parent: HOOKSCOPE_KEEP_FREED_MEMORY follows --malloc-default
    print(json.dumps(measure(a.model, a.case, a.quick)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
