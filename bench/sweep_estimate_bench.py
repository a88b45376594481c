"""The sweep-estimate case: the sweep case's resid_pre patching grid (bench/sweep_bench.py,
GPT-2-small shape, 12 layers x 16 positions; quick: 4 x 8) estimated to first order.

Rows, each the median over rounds of a whole call's time against one plain forward
(``model(x)`` under ``inference_mode``, timed in the same round):

* ``hookscope sweep --estimate``: ``sweep(..., estimate=True)``: the shared baseline and
  source forwards, one forward with gradients kept at the 12 swept places, one backward,
  and each cell's ``<grad, source - clean>``. Target: every cell estimated for at most 5
  plain forwards' time.
* ``hookscope sweep (batched, exact)``: the default sweep, every cell run (the reference
  the estimate is read against).
* ``transformer_lens X attribution``: TransformerLens's attribution-patching recipe on the
  same weights (:func:`bench.tl_peer.resid_pre_attribution`), its grid checked against the
  estimate's; a note only where TransformerLens does not import (or ``--no-peers``).

The check: Spearman's rank correlation of the estimated grid with the exact one, and the
largest |estimate - exact| beside the spread of the exact grid.
"""

from __future__ import annotations

import statistics
import time
from typing import Any, Callable

import numpy as np
import torch

from hookscope.core.analyses import spearman, sweep

from .sweep_bench import resid_pre_grid
from .timing import median_seconds, ratio_row
from .tl_peer import attribution_row

TARGET = 5.0  # plain forwards' time for every cell's estimate


def run(quick: bool = False, repeats: int = 3, log: Callable[[str], None] = print,
        now: Callable[[], float] = time.perf_counter, smoke: bool = False,
        peers: bool = True) -> dict:
    """Time the rows; returns ``{"meta": ..., "rows": [...]}`` (see :func:`render`).
    ``smoke``: the sweep case's smoke shape (2 layers, 64 wide), to check the case runs;
    ``peers``: the TransformerLens row too."""
    g = resid_pre_grid(quick, smoke)
    layers, tokens, width, model, metric, over, tpl = (g.layers, g.tokens, g.width, g.model,
                                                        g.metric, g.over, g.template)
    cells, x = g.cells, g.corrupted

    def plain() -> Any:
        with torch.inference_mode():
            return model(x)

    def estimated() -> Any:
        return sweep(model, x, over, tpl, metric, estimate=True)

    def exact() -> Any:
        return sweep(model, x, over, tpl, metric)

    for _ in range(3):  # warm-up
        plain()
    est = estimated()
    ref = exact()
    seconds: dict[str, list[float]] = {"estimate": [], "exact": []}
    ratios: dict[str, list[float]] = {"estimate": [], "exact": []}
    plains: list[float] = []
    for r in range(repeats):
        for key, fn in (("estimate", estimated), ("exact", exact)):
            plain_s = median_seconds(plain, 9, now)
            plains.append(plain_s)
            s = median_seconds(fn, 1, now)
            seconds[key].append(s)
            ratios[key].append(s / plain_s)
        log(f"  sweep-estimate round {r + 1}/{repeats}")
    rho = spearman(est.estimates.reshape(-1), ref.values.reshape(-1))
    err = float(np.abs(est.estimates - ref.values).max())
    spread = float(np.ptp(ref.values))
    parts = est.timings_ms
    rows = [
        ratio_row("hookscope sweep --estimate", seconds["estimate"], ratios["estimate"], TARGET,
             f"every cell from {est.forwards['baseline']} baseline + {est.forwards['source']} "
             f"source forward + {est.forwards['gradient']} forward with gradients and its "
             f"backward (prepare {parts.get('prepare', 0):.0f} ms, estimate "
             f"{parts.get('estimate', 0):.0f} ms); Spearman with the exact grid "
             f"{rho if rho is None else round(rho, 4)}; max |estimate - exact| {err:.3g} "
             f"(the exact grid spans {spread:.3g})"),
        ratio_row("hookscope sweep (batched, exact)", seconds["exact"], ratios["exact"], None,
             f"{ref.batch['forwards']} batched forwards of up to {ref.batch['rows']} rows"),
        attribution_row(g, est.estimates, plain, repeats, now, peers),
    ]
    meta = {"layers": layers, "tokens": tokens, "width": width, "cells": cells,
            "repeats": repeats,
            "plain_ms": statistics.median(plains) * 1e3, "spearman": rho,
            "max_abs_error": err, "exact_span": spread, "threads": torch.get_num_threads(),
            "clock": "cpu" if now is time.process_time else "wall"}
    return {"meta": meta, "rows": rows}


def render(result: dict) -> str:
    m = result["meta"]
    lines = [f"Sweep estimate: the {m['layers']} x {m['tokens']} resid_pre patching grid "
             f"({m['cells']} cells, HF GPT-2, {m['width']} wide, random weights) estimated to first order; "
             f"plain forward {m['plain_ms']:.1f} ms; {m['threads']} threads, {m['clock']} clock, "
             f"{m['repeats']} rounds",
             f"{'row':<34}{'seconds':>9}{'/ plain forward':>22}{'target':>15}  note"]
    for r in result["rows"]:
        if "seconds" not in r:
            lines.append(f"{r['name']:<34}{'':>9}{'':>22}{'':>15}  {r['note']}")
            continue
        target = (f"<= {r['target']:.2f} {'OK' if r['met'] else 'MISSED'}"
                  if "target" in r else "")
        lo, hi = r["ratio_range"]
        ratio = f"{r['ratio']:.2f} [{lo:.2f}-{hi:.2f}]"
        lines.append(f"{r['name']:<34}{r['seconds']:>9.2f}{ratio:>22}{target:>15}  {r['note']}")
    return "\n".join(lines)


if __name__ == "__main__":  # python -m bench.sweep_estimate_bench [--quick] [--smoke] [--cpu-clock]
    import sys

    clock = time.process_time if "--cpu-clock" in sys.argv else time.perf_counter
    print(render(run(quick="--quick" in sys.argv, log=lambda s: print(s, file=sys.stderr),
                     now=clock, smoke="--smoke" in sys.argv)))
