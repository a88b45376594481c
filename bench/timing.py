"""Paired A/B timing and peak-memory measurement.

Timing: after warm-up, each of ``pairs`` rounds runs the plain forward and the
case back to back, alternating which goes first so neither side always gets
the warmer cache. The figure that matters is the median of the per-pair
ratios ``case / plain``: a pair shares the machine's state at that moment
(frequency, other load), so slow drift cancels out of the ratio.

Memory: see :mod:`bench.memory_case`; on CPU every case is measured in a
fresh child process (``tracemalloc`` does not see torch's allocations), on
CUDA with ``torch.cuda.max_memory_allocated`` in this process.
"""

from __future__ import annotations

import gc
import json
import os
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path
from dataclasses import dataclass, field
from typing import Callable

import torch


@dataclass
class Paired:
    """The result of one paired A/B timing."""

    plain_ms: list[float] = field(default_factory=list)
    case_ms: list[float] = field(default_factory=list)
    floor_ms: list[float] = field(default_factory=list)  # its floor, timed beside it (Timed.floor)
    error: str = ""   # the case failed during warm-up and was not timed

    @property
    def ratios(self) -> list[float]:
        return [c / p for p, c in zip(self.plain_ms, self.case_ms)]

    @property
    def floor_deltas(self) -> list[float]:
        """``(case - floor) / plain`` of each round's triple (empty without a floor)."""
        return [(k - f) / p for p, k, f in zip(self.plain_ms, self.case_ms, self.floor_ms)]

    def summary(self) -> dict:
        if self.error:
            return {"error": self.error}
        r = sorted(self.ratios)
        q = statistics.quantiles(r, n=4) if len(r) >= 2 else [r[0], r[0], r[0]]
        return {
            "pairs": len(r),
            "plain_median_ms": statistics.median(self.plain_ms),
            "median_ms": statistics.median(self.case_ms),
            "ratio": statistics.median(r),
            "ratio_q1": q[0],
            "ratio_q3": q[2],
            "ratio_min": r[0],
            "ratio_max": r[-1],
            "round_ratios": self.ratios,  # in round order, for per-round comparisons
            # (case - floor) / plain of each round's triple, where the floor was timed beside it
            **({"round_over_floor": self.floor_deltas} if self.floor_ms else {}),
        }


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


#: What :func:`clock` reads: wall time, or this process's CPU time (``--clock cpu``),
#: which other processes on a shared machine do not inflate (at one thread it is the
#: work done; with more, threads spinning at a barrier count too).
CLOCKS = {"wall": time.perf_counter, "cpu": time.process_time}
_now = time.perf_counter


def use_clock(name: str) -> None:
    global _now
    _now = CLOCKS[name]


def clock(fn: Callable[[], object], device: str) -> float:
    """Milliseconds of one call of ``fn`` (synchronised on CUDA); its result is dropped
    inside the timed region, so freeing what it kept is part of its cost."""
    _sync(device)
    t0 = _now()
    out = fn()
    _sync(device)
    del out
    return (_now() - t0) * 1e3


def paired(plain: Callable[[], object], case: Callable[[], object], pairs: int,
           warmup: int = 2, device: str = "cpu",
           prepare: Callable[[], None] | None = None, warm_s: float = 0.25) -> Paired:
    """Interleave ``plain`` and ``case`` ``pairs`` times after warming both up.

    Warm-up is at least ``warmup`` rounds and at least ``warm_s`` seconds (at most
    100 rounds): a fresh process's first convolutions are ~100x slower than later
    ones while oneDNN builds its kernels. ``prepare`` runs before every call of
    ``case``, outside the timed region.
    """
    prep = prepare or (lambda: None)
    t0 = time.perf_counter()
    rounds = 0
    while rounds < warmup or (time.perf_counter() - t0 < warm_s and rounds < 100):
        clock(plain, device)
        prep()
        clock(case, device)
        rounds += 1
    res = Paired()
    gc.collect()
    gc_was = gc.isenabled()
    gc.disable()  # a collection landing in one side of a pair would skew that ratio
    try:
        for i in range(pairs):
            prep()
            if i % 2 == 0:
                p = clock(plain, device)
                c = clock(case, device)
            else:
                c = clock(case, device)
                p = clock(plain, device)
            res.plain_ms.append(p)
            res.case_ms.append(c)
    finally:
        if gc_was:
            gc.enable()
    return res


@dataclass
class Timed:
    """One case for :func:`shuffled_rounds`: what it is paired against, and how often."""

    plain: Callable[[], object]
    fn: Callable[[], object]
    prepare: Callable[[], None] | None = None
    pairs: int = 0          # at most this many rounds (0: every round)
    #: The reference a floor target is read against, timed with the pair (a triple):
    #: the case's distance to it is then taken between calls a few ms apart.
    floor: Callable[[], object] | None = None


def shuffled_rounds(cases: dict[str, Timed], rounds: int, device: str = "cpu",
                    seed: int = 0, warm_s: float = 0.25,
                    progress: Callable[[str], None] | None = None) -> dict[str, Paired]:
    """Every case, paired with its plain forward, in every round, in a new random order.

    One pair is a plain call and a case call back to back (which goes first
    alternates). Shuffling the order each round spreads a noisy minute of a
    shared machine over all cases instead of landing on one, and every case
    (Hookscope's and the references it is read against) is measured in the
    same process under the same conditions, so a row and its floor can be
    compared round by round (:func:`round_deltas`).

    A case with a ``floor`` (the reference its target is read against) is timed
    as a triple instead: plain, case and floor back to back in a drawn order,
    so the case's distance to its floor comes from calls milliseconds apart.
    Read from the two separate pairs of a round instead, seconds apart on a
    big model, that distance had twice the spread (ResNet-50 b1, three runs of
    12 rounds: IQR 0.03-0.09 wide against 0.13-0.23).

    Warm-up: each case and its plain forward run at least twice and for at
    least ``warm_s`` seconds (a fresh process's first convolutions are ~100x
    slower while oneDNN builds kernels).
    """
    rng = random.Random(seed)
    failed: dict[str, str] = {}
    for name, c in cases.items():
        t0 = time.perf_counter()
        prep = c.prepare or (lambda: None)
        done = 0
        try:
            while done < 2 or (time.perf_counter() - t0 < warm_s and done < 50):
                clock(c.plain, device)
                prep()
                clock(c.fn, device)
                done += 1
        except Exception as exc:  # one failing case (e.g. a peer's API) must not sink the rest
            failed[name] = f"{type(exc).__name__}: {str(exc).strip().splitlines()[0][:200]}"
        if progress:
            progress(f"warm {name} {time.perf_counter() - t0:.1f} s"
                     + (f" FAILED {failed[name]}" if name in failed else ""))
    cases = {n: c for n, c in cases.items() if n not in failed}
    out = {name: Paired() for name in cases}
    out.update((n, Paired(error=e)) for n, e in failed.items())
    gc.collect()
    gc_was = gc.isenabled()
    gc.disable()  # a collection landing in one side of a pair would skew that ratio
    try:
        for r in range(rounds):
            order = [n for n, c in cases.items() if not c.pairs or r < c.pairs]
            rng.shuffle(order)
            t0 = time.perf_counter()
            for name in order:
                c = cases[name]
                # Plain and case (and the floor, where there is one) back to back, in a
                # drawn order; a case's own preparation is never inside a timed call.
                calls = [("p", c.plain), ("k", c.fn)] + ([("f", c.floor)] if c.floor else [])
                rng.shuffle(calls)
                got = {}
                for key, fn in calls:
                    if key == "k" and c.prepare:
                        c.prepare()
                    got[key] = clock(fn, device)
                out[name].plain_ms.append(got["p"])
                out[name].case_ms.append(got["k"])
                if c.floor:
                    out[name].floor_ms.append(got["f"])
                # Garbage in reference cycles goes before the next case, not at the end of
                # the round: TorchLens's trace leaves 1.15 GiB of ResNet-50 b8 activations
                # in cycles, and a round's worth of that made the heap's freed top pass
                # the 2 GiB glibc keeps, so it trimmed and the next cases faulted their
                # pages in again. Everything made since the last collection is in the
                # youngest generation while the collector is off, so that one is enough.
                gc.collect(0)
            gc.enable()
            gc.collect()
            gc.disable()
            if progress:
                progress(f"round {r + 1}/{rounds} {time.perf_counter() - t0:.1f} s")
    finally:
        if gc_was:
            gc.enable()
    return out


def _median_iqr(d: list[float], key: str) -> dict:
    if not d:
        return {}
    d = sorted(d)
    q = statistics.quantiles(d, n=4) if len(d) >= 2 else [d[0], d[0], d[0]]
    return {key: statistics.median(d), f"{key}_q1": q[0], f"{key}_q3": q[2]}


def round_deltas(case: Paired, floor: Paired) -> dict:
    """Median and IQR over rounds of the case's ratio minus the floor's.

    ``over_floor``: from the triple of each round where the floor was timed beside
    the case (``(case - floor) / plain``, three calls back to back); without one,
    from the two pairs of the round. ``over_floor_pairs``: always the latter, from
    pairs that may be seconds apart, kept to compare the two estimates.
    """
    n = min(len(case.ratios), len(floor.ratios))
    out = _median_iqr([a - b for a, b in zip(case.ratios[:n], floor.ratios[:n])], "over_floor_pairs")
    if case.floor_ms and len(case.floor_ms) == len(case.case_ms):
        out.update(_median_iqr(case.floor_deltas, "over_floor"))
    elif out:
        out.update(over_floor=out["over_floor_pairs"], over_floor_q1=out["over_floor_pairs_q1"],
                   over_floor_q3=out["over_floor_pairs_q3"])
    return out


def repeat(fn: Callable[[], object], n: int, warmup: int = 5, device: str = "cpu") -> dict:
    """Absolute timing of a small fixed cost: median, min and max of ``n`` calls."""
    for _ in range(warmup):
        clock(fn, device)
    gc.collect()
    ms = [clock(fn, device) for _ in range(n)]
    return {"median_ms": statistics.median(ms), "min_ms": min(ms), "max_ms": max(ms), "n": n}


# -- memory ------------------------------------------------------------------------
#: In a "live" memory child every block of at least this size is mapped on its own
#: (glibc's ``M_MMAP_THRESHOLD``, fixed, so it does not grow as blocks are freed).
LIVE_MMAP_THRESHOLD = 64 * 1024


def live_env() -> dict[str, str]:
    """The environment of a child whose peak RSS is the peak of live memory.

    With the library's default (freed memory kept for reuse) or glibc's own
    (a threshold that grows), where a freed block lands in the heap decides how
    much of it stays resident, and one case's peak falls on a few discrete
    heap layouts from one process to the next (ResNet-18 b8 plain: 65, 81 and
    96 MiB). With every tensor-sized block mapped on its own, a freed tensor
    leaves the resident set at once: the high-water mark is what was live at
    the worst moment, the same to ~0.2 MiB in every process.
    """
    return {**os.environ, "HOOKSCOPE_KEEP_FREED_MEMORY": "0",
            "MALLOC_MMAP_THRESHOLD_": str(LIVE_MMAP_THRESHOLD)}


def memory_in_child(model: str, case: str, quick: bool, timeout: float = 300.0,
                    live: bool = False) -> dict:
    """Run ``python -m bench.memory_case`` for one (model, case) and return its JSON.

    A fresh process per case: its peak RSS belongs to that case alone. ``live``:
    measured under :func:`live_env` (the peak of live memory, layout-independent)
    instead of the parent's malloc setting.
    """
    cmd = [sys.executable, "-m", "bench.memory_case", model, case] + (["--quick"] if quick else [])
    try:
        # From the repository root, so that ``-m bench`` resolves wherever we were started.
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                              cwd=Path(__file__).resolve().parent.parent,
                              env=live_env() if live else None)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout:.0f} s"}
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
        return {"error": f"exit {proc.returncode}: {tail[0]}"}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def memory_cuda(fn: Callable[[], object]) -> dict:
    """Peak CUDA memory of one call of ``fn`` above what was allocated before it."""
    fn()  # warm-up: learn in-place victims, allocator caches
    gc.collect()
    torch.cuda.synchronize()
    base = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    out = fn()
    torch.cuda.synchronize()
    peak = torch.cuda.max_memory_allocated() - base
    del out
    return {"peak_above_model_mib": peak / 2**20, "method": "cuda.max_memory_allocated"}


def median_seconds(fn: Callable[[], object], n: int, now: Callable[[], float]) -> float:
    """The median of ``n`` calls of ``fn``, timed with the clock ``now``."""
    times = []
    for _ in range(n):
        t0 = now()
        fn()
        times.append(now() - t0)
    return statistics.median(times)


def ratio_row(name: str, seconds: list[float], ratios: list[float], target: float | None,
              note: str) -> dict:
    """A row of a separate case's table: the medians over rounds of its seconds and of its
    ratio to the plain forward (with their range), judged against ``target`` where set."""
    ratio = statistics.median(ratios)
    row = {"name": name, "seconds": statistics.median(seconds), "ratio": ratio,
           "ratio_range": [min(ratios), max(ratios)], "note": note}
    if target is not None:
        row["target"] = target
        row["met"] = ratio <= target
    return row


def timed_call(fn: Callable[[], object], now: Callable[[], float]) -> tuple[float, object]:
    """One call of ``fn`` timed with the clock ``now``: its seconds and its result."""
    t0 = now()
    out = fn()
    return now() - t0, out


def clock_name(now: Callable[[], float]) -> str:
    """``"cpu"`` or ``"wall"``: which of :data:`CLOCKS` ``now`` is (for a case's meta)."""
    return "cpu" if now is time.process_time else "wall"


def inference_forward(model: Callable[..., object], x: object) -> Callable[[], object]:
    """The plain forward a case is read against: ``model(x)`` (``model(**x)`` for a dict of
    inputs) under ``inference_mode``."""
    def forward() -> object:
        with torch.inference_mode():
            return model(**x) if isinstance(x, dict) else model(x)  # type: ignore[arg-type]
    return forward


def rounds_against_plain(plains: list[Callable[[], object]], fns: dict[str, Callable[[], object]],
                         repeats: int, now: Callable[[], float], plain_n: int,
                         log: Callable[[int, dict[str, list[float]], list[float]], None] | None = None
                         ) -> tuple[dict[str, list[float]], dict[str, list[float]], list[float]]:
    """Each round, each of ``fns`` right after plain forwards of its own: the sum over
    ``plains`` of each one's median of ``plain_n`` calls, then one call of the function.
    Returns ``(seconds, ratios, plain seconds)``, the first two per key of ``fns``, one entry
    a round (ratio: the call over its round's plain time); ``log(round, seconds, plain
    seconds)`` after each round, with the figures so far."""
    seconds: dict[str, list[float]] = {k: [] for k in fns}
    ratios: dict[str, list[float]] = {k: [] for k in fns}
    plain_s: list[float] = []
    for r in range(repeats):
        for key, fn in fns.items():
            p = sum(median_seconds(plain, plain_n, now) for plain in plains)
            plain_s.append(p)
            s = median_seconds(fn, 1, now)
            seconds[key].append(s)
            ratios[key].append(s / p)
        if log is not None:
            log(r + 1, seconds, plain_s)
    return seconds, ratios, plain_s


def case_main(run: Callable[..., dict], render: Callable[[dict], str]) -> None:
    """A separate case's module run as a script: ``[--quick] [--smoke] [--cpu-clock]``; the
    table on stdout, the progress on stderr."""
    now = time.process_time if "--cpu-clock" in sys.argv else time.perf_counter
    print(render(run(quick="--quick" in sys.argv, smoke="--smoke" in sys.argv,
                     log=lambda s: print(s, file=sys.stderr), now=now)))
