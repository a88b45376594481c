"""The sweep-inputs case: a dose-response sweep over a set of prompts on ``demo:lm``.

100 prompts (quick: 20, smoke: 6) x 8 strengths of ``add`` (``linspace(0,8,8)``; smoke: 2)
x 4 layers (``blocks.0``, ``blocks.1`` and their ``mlp``), metric ``logit:e`` at the last
position. The prompts share their length, so one batched forward takes rows of many
prompts (prompts of different lengths are grouped by length).

Rows, each the median over rounds of a whole call's time:

* ``sweep over the input set``: ``sweep(..., input_set=prompts)``: every input's baseline
  (batched across inputs), the cells of every input as rows of shared forwards.
  Target: at least 5 times faster than the loop below.
* ``loop of single-input sweeps``: ``sweep(model, x, ...)`` for each prompt in turn
  (each batched over its own cells), the way one would do it without input sets.

The check: the largest |mean of the loop's grids - the set's grid| (batched rows round
differently from single runs, nothing more).
"""

from __future__ import annotations

import statistics
import time
from typing import Any, Callable

import numpy as np
import torch

from hookscope.core import Add, load_model, parse_input
from hookscope.core.analyses import sweep

from .timing import case_main, clock_name, median_seconds

TARGET = 5.0  # the loop's time over the set's
LAYERS = "blocks.0,blocks.1,blocks.0.mlp,blocks.1.mlp"
_WORDS = ["the cat", "a dog ", "my hat", "one ox", "an elk", "her pen", "the sun", "a cup ",
          "big box", "old map"]
_VERBS = [" sat on", " ran to", " saw it", " hid in", " was at"]


def prompts(n: int) -> list[str]:
    """``n`` prompts of one length (14 characters: the demo model reads characters)."""
    out = []
    for i in range(n):
        text = (_WORDS[i % len(_WORDS)] + _VERBS[(i // len(_WORDS)) % len(_VERBS)])
        out.append((text + " " * 14)[:14] if i % 2 else (text + ". " * 7)[:14])
    return out


def run(quick: bool = False, repeats: int = 3, log: Callable[[str], None] = print,
        now: Callable[[], float] = time.perf_counter, smoke: bool = False) -> dict:
    """Time the two rows; returns ``{"meta": ..., "rows": [...]}`` (see :func:`render`)."""
    n, strengths = (6, 2) if smoke else (20, 8) if quick else (100, 8)
    lm = load_model("demo:lm")
    codec = lm.meaning.codec
    xs = [parse_input("text:" + p, lm.example_input, codec) for p in prompts(n)]
    v = torch.randn(lm.module.head.in_features, generator=torch.Generator().manual_seed(0))
    over = {"layer": LAYERS, "alpha": f"linspace(0,8,{strengths})"}
    tpl = {"{layer}": lambda alpha: Add(v, alpha)}
    metric = "logit:e"

    def over_set() -> Any:
        return sweep(lm.module, None, over, tpl, metric, meaning=lm.meaning, input_set=xs)

    def loop() -> list[Any]:
        return [sweep(lm.module, x, over, tpl, metric, meaning=lm.meaning) for x in xs]

    got = over_set()  # warm-up, and the figures checked
    singles = loop()
    err = float(np.abs(np.mean([s.values for s in singles], axis=0) - got.values).max())
    seconds: dict[str, list[float]] = {"set": [], "loop": []}
    for r in range(repeats):
        for key, fn in (("set", over_set), ("loop", loop)):
            seconds[key].append(median_seconds(fn, 1, now))
        log(f"  sweep-inputs round {r + 1}/{repeats}")
    ratios = [lp / st for lp, st in zip(seconds["loop"], seconds["set"])]
    speedup = statistics.median(ratios)
    best = np.unravel_index(int(np.nanargmax(got.values)), got.values.shape)
    rows = [
        {"name": "sweep over the input set", "seconds": statistics.median(seconds["set"]),
         "speedup": speedup, "speedup_range": [min(ratios), max(ratios)], "target": TARGET,
         "met": speedup >= TARGET,
         "note": f"{got.forwards['baseline']} baseline forwards, {got.batch['forwards']} batched "
                 f"forwards for {got.batch['cells']} input cells; max |set - mean of loop| "
                 f"{err:.3g}"},
        {"name": "loop of single-input sweeps", "seconds": statistics.median(seconds["loop"]),
         "note": f"{n} sweeps, {sum(s.forwards['baseline'] + s.forwards['intervened'] for s in singles)} forwards"},
    ]
    meta = {"inputs": n, "strengths": strengths, "layers": LAYERS.count(",") + 1,
            "cells": got.cells, "repeats": repeats, "max_abs_error": err,
            "best": {"layer": got.axes["layer"][best[0]], "alpha": got.axes["alpha"][best[1]],
                     "mean": float(got.values[best]), "spread": float(got.spread[best])},
            "threads": torch.get_num_threads(),
            "clock": clock_name(now)}
    return {"meta": meta, "rows": rows}


def render(result: dict) -> str:
    m = result["meta"]
    lines = [f"Sweep over inputs: {m['inputs']} prompts x {m['strengths']} strengths of add x "
             f"{m['layers']} layers on demo:lm ({m['cells']} cells an input), metric logit:e; "
             f"{m['threads']} threads, {m['clock']} clock, {m['repeats']} rounds; best cell "
             f"{m['best']['layer']} alpha {m['best']['alpha']}: {m['best']['mean']:.4g} "
             f"± {m['best']['spread']:.3g}",
             f"{'row':<30}{'seconds':>9}{'speedup':>22}{'target':>15}  note"]
    for r in result["rows"]:
        if "speedup" in r:
            lo, hi = r["speedup_range"]
            speed = f"{r['speedup']:.2f}x [{lo:.2f}-{hi:.2f}]"
            target = f">= {r['target']:.0f}x {'OK' if r['met'] else 'MISSED'}"
        else:
            speed, target = "", ""
        lines.append(f"{r['name']:<30}{r['seconds']:>9.2f}{speed:>22}{target:>15}  {r['note']}")
    return "\n".join(lines)


if __name__ == "__main__":  # python -m bench.sweep_inputs_bench [--quick] [--smoke] [--cpu-clock]
    case_main(run, render)
