"""The sweep-estimate case: two grids estimated to first order against their exact sweeps.

* The sweep case's resid_pre patching grid (bench/sweep_bench.py, GPT-2-small shape,
  12 layers x 16 positions; quick: 4 x 8; smoke: 2 x 4, 64 wide).
* ResNet-18's channel zero-ablation grid: torchvision's ResNet-18 layout
  (:mod:`bench.models_vision`, seeded random weights, one 224² image; quick 128², smoke
  32²), each of its 8 residual blocks (``layer1.0`` ... ``layer4.1``) x 16 output channels
  (smoke: 4), each cell ``zero@units=U`` on the block's output, the metric the logit of
  the class the plain forward ranks first.

Rows per grid, each the median over rounds of a whole call's time against one plain
forward of that model (``model(x)`` under ``inference_mode``, timed in the same round):

* ``... --estimate``: ``sweep(..., estimate=True)``: one forward with gradients kept at the
  swept places (also the shared baseline), one backward, a patch's source forward, and each
  cell's ``<grad, delta>`` (``delta``: source - clean for a patch, -clean for a zero).
  Target: every cell estimated for at most 5 plain forwards' time.
* ``... (batched, exact)``: the default sweep, every cell run (the reference the estimate
  is read against).
* GPT-2 only, ``transformer_lens X attribution``: TransformerLens's attribution-patching
  recipe on the same weights (:func:`bench.tl_peer.resid_pre_attribution`), its grid
  checked against the estimate's; a note only where TransformerLens does not import (or
  ``--no-peers``).

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
from .timing import case_main, clock_name, inference_forward, ratio_row, rounds_against_plain
from .tl_peer import attribution_row

TARGET = 5.0  # plain forwards' time for every cell's estimate
RESNET_BLOCKS = tuple(f"layer{i}.{j}" for i in range(1, 5) for j in range(2))


def _estimate_against_exact(model: Any, x: Any, over: dict, tpl: dict, metric: str,
                            repeats: int, now: Callable[[], float],
                            log: Callable[[str], None], label: str) -> dict:
    """``sweep(estimate=True)`` and the exact batched sweep of one grid, each round right after
    plain forwards of its own: both results, their seconds and ratios per round, the plain
    forwards' seconds, and the estimate's agreement with the exact grid."""

    plain = inference_forward(model, x)

    def estimated() -> Any:
        return sweep(model, x, over, tpl, metric, estimate=True)

    def exact() -> Any:
        return sweep(model, x, over, tpl, metric)

    for _ in range(3):  # warm-up
        plain()
    est = estimated()
    ref = exact()
    seconds, ratios, plains = rounds_against_plain(
        [plain], {"estimate": estimated, "exact": exact}, repeats, now, 9,
        lambda r, *_: log(f"  sweep-estimate {label} round {r}/{repeats}"))
    return {"est": est, "ref": ref, "seconds": seconds, "ratios": ratios,
            "plain_ms": statistics.median(plains) * 1e3,
            "spearman": spearman(est.estimates.reshape(-1), ref.values.reshape(-1)),
            "max_abs_error": float(np.abs(est.estimates - ref.values).max()),
            "exact_span": float(np.ptp(ref.values))}


def _rows(got: dict, names: tuple[str, str], grid: str) -> list[dict]:
    est, ref, seconds, ratios = got["est"], got["ref"], got["seconds"], got["ratios"]
    rho, parts = got["spearman"], est.timings_ms
    source = f" + {est.forwards['source']} source forward" if est.forwards["source"] else ""
    base = est.forwards["baseline"]
    rows = [
        ratio_row(names[0], seconds["estimate"], ratios["estimate"], TARGET,
                  f"every cell from {est.forwards['gradient']} forward with gradients "
                  f"({f'+ {base} baseline forward' if base else 'also the baseline'}) and its "
                  f"backward{source} "
                  f"(prepare {parts.get('prepare', 0):.0f} ms, estimate "
                  f"{parts.get('estimate', 0):.0f} ms); Spearman with the exact grid "
                  f"{rho if rho is None else round(rho, 4)}; max |estimate - exact| "
                  f"{got['max_abs_error']:.3g} (the exact grid spans {got['exact_span']:.3g})"),
        ratio_row(names[1], seconds["exact"], ratios["exact"], None,
                  f"{ref.batch['forwards']} batched forwards of up to {ref.batch['rows']} rows"),
    ]
    for row in rows:
        row["grid"] = grid
    return rows


def resnet_channels(quick: bool, smoke: bool) -> tuple[Any, torch.Tensor, dict, dict, str, int]:
    """ResNet-18's blocks x channels zero-ablation grid in the full, ``quick`` or ``smoke``
    shape: the model, the image, the axes, the template, the metric and the image side."""
    from .diff_bench import resnet18

    side, units = (32, 4) if smoke else (128, 16) if quick else (224, 16)
    model, x, _ = resnet18(side)
    with torch.inference_mode():
        top = int(model(x).argmax())
    over = {"layer": ",".join(RESNET_BLOCKS), "unit": f"0:{units}"}
    return model, x, over, {"{layer}": "zero@units={unit}"}, f"logit:#{top}", side


def run(quick: bool = False, repeats: int = 3, log: Callable[[str], None] = print,
        now: Callable[[], float] = time.perf_counter, smoke: bool = False,
        peers: bool = True) -> dict:
    """Time both grids' rows; returns ``{"meta": ..., "rows": [...]}`` (see :func:`render`).
    ``smoke``: each grid's smoke shape, to check the case runs; ``peers``: the
    TransformerLens row too."""
    g = resid_pre_grid(quick, smoke)
    gpt = _estimate_against_exact(g.model, g.corrupted, g.over, g.template, g.metric, repeats,
                                  now, log, "GPT-2 resid_pre")
    rows = _rows(gpt, ("hookscope sweep --estimate", "hookscope sweep (batched, exact)"), "gpt2")
    rows.append(attribution_row(g, gpt["est"].estimates, inference_forward(g.model, g.corrupted),
                                repeats, now, peers) | {"grid": "gpt2"})
    model, x, over, tpl, metric, side = resnet_channels(quick, smoke)
    rn = _estimate_against_exact(model, x, over, tpl, metric, repeats, now, log,
                                 "ResNet-18 channels")
    rows += _rows(rn, ("resnet18 channels --estimate", "resnet18 channels (batched, exact)"),
                  "resnet18")
    units = rn["ref"].values.shape[1]
    meta = {"layers": g.layers, "tokens": g.tokens, "width": g.width, "cells": g.cells,
            "repeats": repeats, "plain_ms": gpt["plain_ms"], "spearman": gpt["spearman"],
            "max_abs_error": gpt["max_abs_error"], "exact_span": gpt["exact_span"],
            "threads": torch.get_num_threads(),
            "clock": clock_name(now),
            "resnet18": {"side": side, "blocks": len(RESNET_BLOCKS), "units": units,
                         "cells": len(RESNET_BLOCKS) * units, "metric": metric,
                         "plain_ms": rn["plain_ms"], "spearman": rn["spearman"],
                         "max_abs_error": rn["max_abs_error"], "exact_span": rn["exact_span"]}}
    return {"meta": meta, "rows": rows}


def render(result: dict) -> str:
    m, rn = result["meta"], result["meta"]["resnet18"]
    heads = {
        "gpt2": f"Sweep estimate: the {m['layers']} x {m['tokens']} resid_pre patching grid "
                f"({m['cells']} cells, HF GPT-2, {m['width']} wide, random weights) estimated to "
                f"first order; plain forward {m['plain_ms']:.1f} ms; {m['threads']} threads, "
                f"{m['clock']} clock, {m['repeats']} rounds",
        "resnet18": f"ResNet-18 ({rn['side']}x{rn['side']}, random weights): {rn['blocks']} blocks "
                    f"x {rn['units']} channels zero-ablated ({rn['cells']} cells), metric "
                    f"{rn['metric']}; plain forward {rn['plain_ms']:.1f} ms",
    }
    lines: list[str] = []
    for grid, head in heads.items():
        lines += [head, f"{'row':<36}{'seconds':>9}{'/ plain forward':>22}{'target':>15}  note"]
        for r in result["rows"]:
            if r.get("grid", "gpt2") != grid:
                continue
            if "seconds" not in r:  # a peer that did not run: its note
                lines.append(f"{r['name']:<36}{'':>9}{'':>22}{'':>15}  {r['note']}")
                continue
            target = (f"<= {r['target']:.2f} {'OK' if r['met'] else 'MISSED'}"
                      if "target" in r else "")
            lo, hi = r["ratio_range"]
            ratio = f"{r['ratio']:.2f} [{lo:.2f}-{hi:.2f}]"
            lines.append(f"{r['name']:<36}{r['seconds']:>9.2f}{ratio:>22}{target:>15}  "
                         f"{r['note']}")
    return "\n".join(lines)


if __name__ == "__main__":  # python -m bench.sweep_estimate_bench [--quick] [--smoke] [--cpu-clock]
    case_main(run, render)
