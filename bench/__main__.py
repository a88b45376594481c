"""Entry point: ``python -m bench [--quick] [--json] [--cases ...] [--models ...] [--device ...]``.

Builds each model, times every case against the plain forward (paired,
interleaved), checks each case's values against a clone-everything
reference, measures peak memory (a fresh process per case on the CPU) and
prints one table with each case's target (see bench/README.md) and whether it is met.
Progress goes to stderr (hookscope.app.progress: the CLI's), the table (or ``--json``) to
stdout.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import fnmatch
import importlib
import math
import os
import platform
import statistics
import sys
import time
from typing import NamedTuple

import torch

from hookscope.app.progress import command_progress
from hookscope.core.engine import fast_slot
from hookscope.core.fast import onepass
from hookscope.core.fast.memory import apply_default, freed_memory_kept, release_freed_memory

from . import competitors
from .cases import Case, arm_hooks_case, compare_clamp_case, first_run_case, model_cases
from .models import BIG, BUILDERS, DEFAULT_MODELS, QUICK_MODELS, BenchModel, build
from .report import judge, render_json, render_text
from .timing import Timed, clock, use_clock, memory_cuda, memory_in_child, repeat, round_deltas, shuffled_rounds

# Rounds per (model, mode): every case is paired with a plain forward once a round.
# Small models get the most: their per-round differences spread widest (at 12 rounds
# ResNet-50 b1's every-leaf-over-floor IQR was 0.06-0.15 wide, its verdict a coin toss
# within ±0.03 of the limit), and a round of theirs is cheap.
ROUNDS = {"quick": {"small": 8, "big": 5, "demo": 30},
          "full": {"small": 24, "big": 10, "demo": 60}}
#: Above this plain-forward time (ms) a model gets the "big" round count.
BIG_MS = 150.0
# A full run gives every model about the same seconds of plain forwards per judged
# case, not the same number of rounds. At 24 rounds ResNet-50 b1 (a 40-45 ms forward)
# gathered 1.1 s where ResNet-18 b8 and the big models gathered 2.7, with the widest
# per-round spread (over-floor rounds -0.1 to +0.2): its target-1 verdict moved +0.046
# to +0.077 between runs of the same code. At 10 rounds ResNet-50 b8's moved -0.000 to
# +0.056 (rounds -0.15 to +0.15 on a busy afternoon). So 5 s each, at most 64 rounds.
TIMED_S = {"quick": 0.0, "full": 5.0}
MAX_ROUNDS = 64
# Cases no target is read from (the peers, the extra references) keep the round count
# by size: they are the slowest calls of a round (TorchLens 3-17x a forward).
UNJUDGED = {"every_leaf_read", "naive_clone"}
# The first-run case deep-copies the model before each call (outside the timing); with
# 4 rounds its median moved 1.26-1.33 between runs on ResNet-50 b1, so a full run times
# it every round.
FIRST_RUN_PAIRS = {"quick": 2, "full": MAX_ROUNDS}
FIXED_N = {"quick": 200, "full": 1000}


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m bench", description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true",
                    help="small inputs, 4-layer GPT, fewer pairs: under 2 minutes on 2 CPU cores")
    ap.add_argument("--smoke", action="store_true",
                    help="with --quick: the sweep and diff cases on a 2-layer, 64-wide GPT-2 "
                         "instead of the GPT-2-small shape (and diff's ResNet-18 on a 32x32 "
                         "image), to check that the bench runs end to end in seconds (their "
                         "figures then say nothing about the real shapes)")
    ap.add_argument("--json", action="store_true", help="print JSON instead of the table")
    ap.add_argument("--cases", default="",
                    help="comma-separated case names or globs (e.g. 'every_leaf*,compare_clamp'); "
                         "plain timing always runs")
    ap.add_argument("--models", default="",
                    help=f"comma-separated models of {', '.join(BUILDERS)}; 'all' for every one, "
                         "'none' for fixed costs only (default: "
                         f"{', '.join(DEFAULT_MODELS)}; --quick: {', '.join(QUICK_MODELS)})")
    ap.add_argument("--no-peers", action="store_true",
                    help="skip TorchLens, nnsight and TransformerLens even where installed")
    # dest is not "save": a library seen in one process patched argparse.Namespace with a
    # save() method, which hides an unset default of that name.
    ap.add_argument("--save", dest="save_path", metavar="PATH", help="also write the JSON to PATH")
    ap.add_argument("--device", default="cpu", help="cpu (default) or cuda[:N]")
    ap.add_argument("--pairs", type=int, default=0,
                    help="override the number of timed rounds (one pair per case per round)")
    ap.add_argument("--repeats", type=int, default=0,
                    help="override how many times each fixed cost (compare, arming) is timed")
    ap.add_argument("--threads", type=int, default=0,
                    help="torch.set_num_threads(N) (default: torch's own choice). On a shared "
                         "machine, 1 thread avoids waiting for a descheduled worker thread at "
                         "every parallel op, which inflates per-op costs")
    ap.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                    help="wall time (default) or this process's CPU time, which other "
                         "processes' load does not inflate (best with --threads 1)")
    ap.add_argument("--no-memory", action="store_true", help="skip the peak-memory measurements")
    ap.add_argument("--memory-runs", type=int, default=1, metavar="N",
                    help="fresh processes for the resident-peak figure of the plain forward and "
                         "of the cases with a memory target, median reported (default 1; the "
                         "targets are judged on the live peak, one more process each)")
    ap.add_argument("--malloc-default", action="store_true",
                    help="switch off the library's default of keeping freed memory for reuse "
                         "(hookscope.core.release_freed_memory, as HOOKSCOPE_KEEP_FREED_MEMORY=0 "
                         "does); shows what page faults cost when captures keep activations alive")
    a = ap.parse_args(argv)
    if a.device.startswith("cuda") and not torch.cuda.is_available():
        ap.error("--device cuda, but torch sees no CUDA device here; use --device cpu")
    return a


def wanted(name: str, patterns: list[str]) -> bool:
    return not patterns or any(fnmatch.fnmatch(name, p) for p in patterns)


def to_device(bm: BenchModel, device: str) -> BenchModel:
    if device != "cpu":
        bm.module.to(device)
        bm.inputs = bm.inputs.to(device)
    return bm


def fixed_row(case: Case, n: int, device: str) -> dict:
    row = {"case": case.name, "title": case.title, "model": "—", "note": case.note}
    try:
        row.update(repeat(case.fn, n, device=device))
        row["pairs"] = n
    except Exception as exc:
        row["error"] = f"{type(exc).__name__}: {exc}"
    return row


def memory(row: dict, case: Case, model: str, a: argparse.Namespace) -> None:
    if a.device != "cpu":
        fig = memory_cuda(case.fn)
        out = case.fn()
        fig["captured_mib"] = (case.captured_bytes(out) if case.captured_bytes else 0) / 2**20
        figs = [fig]
    else:
        # The resident peak with the user's malloc setting moves by tens of MiB from
        # one fresh process to the next (heap layouts: ResNet-18 b8 plain 65-96 MiB),
        # more than a 10% limit leaves. It is reported (median of --memory-runs
        # processes); a memory target is judged on the peak of live memory, measured
        # once more with every tensor-sized block mapped on its own (timing.live_env),
        # the same to ~0.2 MiB in every process.
        judged = case.name == "plain_aa" or bool(case.target and case.target.memory)
        figs = [memory_in_child(model, case.name, a.quick)
                for _ in range(max(1, a.memory_runs) if judged else 1)]
        if judged:
            live = memory_in_child(model, case.name, a.quick, live=True)
            if "error" in live:
                row["live_memory_error"] = live["error"]
            else:
                row["live_peak_mib"] = live["peak_above_model_mib"]
    good = [f for f in figs if "error" not in f]
    if not good:
        row["memory_error"] = figs[0]["error"]
        return
    peaks = sorted(f["peak_above_model_mib"] for f in good)
    row["peak_above_model_mib"] = statistics.median(peaks)
    row["peak_runs_mib"] = peaks
    row["captured_mib"] = good[0].get("captured_mib", 0.0)


def run_model(name: str, a: argparse.Namespace, patterns: list[str],
              mode: str) -> tuple[dict, list[dict], list[str]]:
    bm = to_device(build(name, a.quick), a.device)
    cases = model_cases(bm, a.device)
    plain = cases[0].fn
    cases.insert(4, first_run_case(bm, a.device))
    missing: list[str] = []
    peers: set[str] = set()
    if not a.no_peers:
        comp, missing = competitors.competitor_cases(bm)
        cases += comp
        peers = {c.name for c in comp}
    cases = [c for c in cases if c.name == "plain_aa" or wanted(c.name, patterns)]
    # A floor target needs its reference in the same rounds.
    names = {c.name for c in cases}
    floors = {c.target.floor for c in cases if c.target and c.target.kind == "floor"}
    if names & {"every_leaf", "every_leaf_read"}:   # read against the cheapest correct capture too
        floors.add("naive_victims")
    for c in model_cases(bm, a.device):
        if c.name in floors - names:
            cases.append(c)
    # Round count by the plain forward's size (one timed call after a warm-up call).
    clock(plain, a.device)
    plain_ms = clock(plain, a.device)
    size = "demo" if name.startswith("demo:") else "big" if plain_ms > BIG_MS else "small"
    by_size = a.pairs or ROUNDS[mode][size]
    rounds = a.pairs or max(by_size, min(MAX_ROUNDS, math.ceil(TIMED_S[mode] * 1e3 / max(plain_ms, 1e-3)))
                            if size != "demo" else 0)
    by_name = {c.name: c for c in cases}

    def pairs(c: Case) -> int:  # 0: every round
        if c.name in peers or c.name in UNJUDGED:
            return min(rounds, by_size)
        return min(rounds, FIRST_RUN_PAIRS[mode]) if c.prepare else 0

    timed = {c.name: Timed(c.plain or plain, c.fn, c.prepare, pairs(c),
                           floor=(by_name[c.target.floor].fn if c.target and c.target.kind == "floor"
                                  and c.target.floor in by_name else None))
             for c in cases}
    t0 = time.perf_counter()
    # One warm-up per case, then the rounds: the CLI's progress (a bar on a terminal, a
    # line every few seconds in a log); a case that failed its warm-up is said above it.
    with command_progress(f"  {name:>16}", "step", len(timed) + rounds, sys.stderr) as bar:
        def step(msg: str) -> None:
            if "FAILED" in msg:
                bar.note(f"  {name:>16} {msg}")
            bar.step()
        results = shuffled_rounds(timed, rounds, a.device, progress=step)
    log(f"  {name:>16} {len(cases)} cases × {rounds} rounds {time.perf_counter() - t0:6.1f} s")
    rows = []
    plain_mem: dict = {}
    targets = {}
    for case in cases:
        row = {"case": case.name, "title": case.title, "model": name, "note": case.note}
        row.update(results[case.name].summary())
        try:
            if row.get("error"):
                pass
            elif case.check is not None:
                if case.prepare:
                    case.prepare()
                row["correct"], row["check_note"] = case.check(case.fn())
        except Exception as exc:  # one failing case must not sink the table
            row["error"] = f"{type(exc).__name__}: {exc}"
        t = case.target
        if (t is not None and t.kind == "floor" and t.floor in results
                and not row.get("error") and not results[t.floor].error):
            row["floor_case"] = t.floor
            row["floor_ratio"] = results[t.floor].summary()["ratio"]
            row.update(round_deltas(results[case.name], results[t.floor]))
        # Demos are too small for RSS to resolve, and the clone reference's memory is
        # context, not a target: both are measured in full mode only.
        do_mem = (case.memory and not a.no_memory and not row.get("error")
                  and (name in BIG or not a.quick)
                  and not (a.quick and case.name == "naive_clone"))
        if do_mem:
            tm = time.perf_counter()
            memory(row, case, name, a)
            log(f"  {name:>16} memory {case.name:<18} {time.perf_counter() - tm:6.1f} s")
            if case.name == "plain_aa":
                plain_mem = row
        targets[case.name] = case.target
        rows.append(row)
    for row in rows:
        judge(row, targets[row["case"]], plain_mem)
    by_case = {r["case"]: r for r in rows}
    for case, ref, what in (("every_leaf", "naive_victims", "− the cheapest correct capture"),
                            ("naive_victims", "naive_detach", "− the detach floor (the copies alone)"),
                            ("every_leaf_read", "naive_victims", "− the cheapest correct capture"),
                            ("every_leaf_read", "every_leaf", "− the run alone (what the reads cost)")):
        # Target 1 is read against the detach floor; these split its difference into
        # what correct values cost anyone (the copies) and what Hookscope adds.
        if case in by_case and ref in by_case and not by_case[case].get("error") \
                and not by_case[ref].get("error"):
            d = round_deltas(results[case], results[ref])
            if d:
                by_case[case][f"over_{ref}"] = d["over_floor_pairs"]
                by_case[case]["note"] += (f"; {what}: {d['over_floor_pairs']:+.3f} "
                                          f"[{d['over_floor_pairs_q1']:+.3f}–{d['over_floor_pairs_q3']:+.3f}]")
    info = {"label": bm.label, "params": bm.params, "plain_ms": plain_ms}
    return info, rows, missing


class SeparateCase(NamedTuple):
    """A case with a table of its own (not per model): its module in bench/, the key of its
    figures in ``meta``, and what the log says while it runs."""

    name: str
    module: str
    key: str
    what: str


SEPARATE_CASES = (
    SeparateCase("sweep", "sweep_bench", "sweep",
                 "layers x positions patching, HF GPT-2 shape"),
    SeparateCase("generate", "generate_bench", "generate",
                 "new input shapes, generation with an intervention"),
    SeparateCase("sweep-estimate", "sweep_estimate_bench", "sweep_estimate",
                 "the resid_pre grid estimated to first order, HF GPT-2 shape"),
    SeparateCase("sweep-inputs", "sweep_inputs_bench", "sweep_inputs",
                 "add at 8 strengths x 4 layers over a prompt set, demo:lm"),
    SeparateCase("diff", "diff_bench", "diff",
                 "ResNet-18 and the GPT-2-small shape against themselves in bfloat16"),
)


def run_separate(case: SeparateCase, a: argparse.Namespace, meta: dict) -> str | None:
    """Run ``case`` (its module's ``run``): its table, its figures in ``meta[case.key]``; a
    case whose optional package (transformers) is missing is listed in ``meta["missing"]``."""
    from .timing import CLOCKS

    module = importlib.import_module(f".{case.module}", __package__)
    log(f"{case.name} ({case.what}) ...")
    extra = {"peers": not a.no_peers} if case.name in ("sweep", "sweep-estimate") else {}
    try:
        got = module.run(quick=a.quick, repeats=a.pairs or 3, log=log, now=CLOCKS[a.clock],
                         smoke=a.smoke, **extra)
    except ImportError as exc:  # transformers, for the Hugging Face GPT-2
        meta["missing"] = sorted(set(meta["missing"]) | {f"{case.name}: skipped ({exc})"})
        return None
    meta[case.key] = got
    return module.render(got)


def main(argv: list[str] | None = None) -> int:
    a = parse_args(argv)
    mode = "quick" if a.quick else "full"
    patterns = [p.strip() for p in a.cases.split(",") if p.strip()]
    spec = a.models.strip()
    if not spec:
        models = list(QUICK_MODELS if a.quick else DEFAULT_MODELS)
    elif spec == "all":
        models = list(BUILDERS)
    elif spec == "none":
        models = []
    else:
        models = [m.strip() for m in spec.split(",") if m.strip()]
    unknown = [m for m in models if m not in BUILDERS]
    if unknown:
        log(f"unknown model(s) {unknown}: choose from {', '.join(BUILDERS)}")
        return 2
    use_clock(a.clock)
    if a.threads:
        torch.set_num_threads(a.threads)
        os.environ["BENCH_THREADS"] = str(a.threads)  # memory children follow
    # Hookscope as a user of the app gets it: the start-up's default (kept freed memory,
    # see hookscope.core.fast.memory); the plain forward shares the process and the setting.
    apply_default()
    if a.malloc_default:
        release_freed_memory()
        os.environ["HOOKSCOPE_KEEP_FREED_MEMORY"] = "0"  # memory children follow
    malloc_tuned = freed_memory_kept()
    t_start = time.perf_counter()
    meta = {
        "torch": torch.__version__, "python": platform.python_version(),
        "platform": platform.platform(), "cpus": os.cpu_count(),
        "threads": torch.get_num_threads(),
        "threads_default": not a.threads, "clock": a.clock, "device": a.device, "quick": a.quick,
        "malloc_keeps_freed_memory": malloc_tuned,
        # the compiled kernel, or why the torch path runs
        "statistics_path": onepass.which() if fast_slot.active() else "torch reductions (HOOKSCOPE_FAST=0)",
        "fast": fast_slot.active() is not None,  # hookscope.core.fast's speed-ups (HOOKSCOPE_FAST)
        "when": _dt.datetime.now().isoformat(timespec="seconds"),
        # Other processes on a small machine move every figure: the load is recorded.
        "load_before": [round(x, 2) for x in os.getloadavg()],
        "models": {}, "competitors": competitors.available(), "missing": [],
        "memory_method": ("torch.cuda.max_memory_allocated" if a.device != "cpu" else
                          "VmHWM − VmRSS in a fresh process per case (bench/memory_case.py); judged on "
                          "the live peak (one more process, every block ≥ 64 KiB mapped on its own); "
                          "the resident peak with the run's malloc setting first"
                          + (f", the median of {a.memory_runs} processes [lowest–highest]"
                             if a.memory_runs > 1 else "")),
    }
    rows: list[dict] = []
    for name in models:
        log(f"{name} ...")
        info, mrows, missing = run_model(name, a, patterns, mode)
        meta["models"][name] = info
        rows += mrows
        meta["missing"] = sorted(set(meta["missing"]) | set(missing))
    tables = [run_separate(case, a, meta) for case in SEPARATE_CASES
              if wanted(case.name, patterns) and a.device == "cpu"]
    fixed = [compare_clamp_case(a.device), *arm_hooks_case(1000)]
    for case in fixed:
        if wanted(case.name, patterns):
            row = fixed_row(case, a.repeats or FIXED_N[mode], a.device)
            judge(row, case.target, None)
            rows.append(row)
            log(f"  {'fixed cost':>16} {case.name:<18} {row.get('median_ms', 0):.3f} ms")
    meta["seconds"] = round(time.perf_counter() - t_start, 1)
    meta["load_after"] = [round(x, 2) for x in os.getloadavg()]
    if a.save_path:
        with open(a.save_path, "w") as f:
            f.write(render_json(meta, rows))
    if a.json:
        print(render_json(meta, rows))
    else:
        print(render_text(meta, rows))
        for m in meta["missing"]:
            print(f"- {m}")
        for table in tables:
            if table:
                print("\n" + table)
        print(f"\n({meta['seconds']} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
