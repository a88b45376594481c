"""The sweep case: a layers × positions residual-patching grid on a GPT-2-small shape.

The model is Hugging Face's ``GPT2LMHeadModel`` built from a config (12 layers, d=768,
12 heads, vocabulary 50257, random weights from a seed; quick mode: 4 layers; smoke mode,
for the tests that only check the case runs end to end: 2 layers, d=64, vocabulary 512). Two random
token sequences of ``T`` tokens differ in a few positions: the *corrupted* one is the input,
the *clean* one the source. Each cell patches the clean run's residual stream before block
``L`` (``resid_pre``: the output of ``transformer.drop`` for ``L = 0``, of
``transformer.h.{L-1}`` after) at one position into the corrupted run, and reads the logit
difference of two tokens at the last position. That is TransformerLens's
``patching.get_act_patch_resid_pre`` grid exactly, so the same weights in TransformerLens
(TransformerLens 4's ``TransformerBridge`` booted from the saved model, or 3.x's
``HookedTransformer``: :mod:`bench.tl_peer`; its logits checked against the Hugging Face
model's first) must give the same numbers; the check column says how close they are.

Rows, each timed as the median of ``repeats`` whole sweeps, against ``cells × one plain
forward`` (``model(x)`` under ``inference_mode``, the median of as many forwards timed in
the same rounds):

* ``hookscope sweep (one by one)``: ``sweep(..., batch=False)``: every cell its comparison,
  bit for bit, with one shared baseline and source forward; target ≤ 1.10.
* ``hookscope sweep (batched)``: the default, cells as rows of batched forwards.
* ``transformer_lens``: ``run_with_cache`` on the clean tokens plus
  ``get_act_patch_resid_pre`` (one hooked forward per cell); skipped, with a note, where
  TransformerLens does not import (it lives in the ``bench`` extra, or a separate venv:
  see bench/README.md).
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from typing import Any, Callable

import torch

from hookscope.core import At, Patch
from hookscope.core.analyses import sweep

from .tl_peer import INSTALL, tl_gpt2, tl_version
from .timing import median_seconds, ratio_row

SEED = 0
DIFFER_AT = (1, 3, 5)  # the positions where the clean and corrupted prompts differ


def build(layers: int, tokens: int, width: int = 768,
          vocab: int = 50257) -> tuple[Any, torch.Tensor, torch.Tensor]:
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(SEED)
    cfg = GPT2Config(n_layer=layers, n_embd=width, n_head=width // 64, n_positions=1024,
                     vocab_size=vocab, bos_token_id=vocab - 1, eos_token_id=vocab - 1)
    model = GPT2LMHeadModel(cfg).eval()
    g = torch.Generator().manual_seed(SEED + 1)
    clean = torch.randint(0, vocab, (1, tokens), generator=g)
    corrupted = clean.clone()
    for p in DIFFER_AT:
        if p < tokens:
            corrupted[0, p] = torch.randint(0, vocab, (1,), generator=g)
    return model, clean, corrupted


@dataclass
class ResidPreGrid:
    """The sweep case's grid, shared by the sweep-estimate case: the model, the clean source
    and the corrupted input, the metric, the axes and the patch template."""

    layers: int
    tokens: int
    width: int
    model: Any
    clean: torch.Tensor
    corrupted: torch.Tensor
    metric: str
    over: dict
    template: dict
    a_tok: int  # the metric is the logit of a_tok minus that of b_tok at the last position
    b_tok: int

    @property
    def cells(self) -> int:
        return self.layers * self.tokens


def resid_pre_grid(quick: bool, smoke: bool) -> ResidPreGrid:
    """The resid_pre patching grid in the full, ``quick`` or ``smoke`` shape."""
    layers, tokens = (2, 4) if smoke else (4, 8) if quick else (12, 16)
    width, vocab = (64, 512) if smoke else (768, 50257)
    model, clean, corrupted = build(layers, tokens, width, vocab)
    a_tok, b_tok = int(clean[0, -1]), int(corrupted[0, 2])
    names = ["transformer.drop"] + [f"transformer.h.{i}" for i in range(layers - 1)]
    return ResidPreGrid(layers, tokens, width, model, clean, corrupted,
                        f"logit-diff:#{a_tok},#{b_tok}",
                        {"layer": ",".join(names), "pos": list(range(tokens))},
                        {"{layer}": lambda pos: Patch(clean, at=At(positions=[pos]))},
                        a_tok, b_tok)


def run(quick: bool = False, repeats: int = 3, log: Callable[[str], None] = print,
        now: Callable[[], float] = time.perf_counter, peers: bool = True,
        smoke: bool = False) -> dict:
    """Time the three rows; returns ``{"meta": ..., "rows": [...]}`` (see :func:`render`).
    ``now``: the clock (the bench's ``--clock``: wall or this process's CPU time). Each
    ratio is the median over rounds of (a sweep / (cells × the median plain forward of the
    same round))."""
    import transformers

    g = resid_pre_grid(quick, smoke)
    layers, tokens, model, clean, metric, over, tpl = (g.layers, g.tokens, g.model, g.clean,
                                                        g.metric, g.over, g.template)
    cells, x = g.cells, g.corrupted

    def plain() -> Any:
        with torch.inference_mode():
            return model(x)

    def ours(batch: bool) -> Callable[[], Any]:
        return lambda: sweep(model, x, over, tpl, metric, batch=batch)

    for _ in range(3):  # warm-up
        plain()
    single = ours(False)()
    batched = ours(True)()
    log(f"  sweep grid {layers} x {tokens} = {cells} cells; batched rows "
        f"{batched.batch['rows']}, {batched.batch['forwards']} forwards")
    rows: list[dict] = []
    plains: list[float] = []
    ratios: dict[str, list[float]] = {"single": [], "batched": [], "tl": []}
    seconds: dict[str, list[float]] = {"single": [], "batched": [], "tl": []}

    def timed(key: str, fn: Callable[[], Any]) -> None:
        plain_s = median_seconds(plain, max(5, cells // 8), now)  # this round's plain forward
        plains.append(plain_s)
        s = median_seconds(fn, 1, now)
        seconds[key].append(s)
        ratios[key].append(s / (cells * plain_s))

    for r in range(repeats):  # rounds: each sweep right after plain forwards of its own
        timed("single", ours(False))
        timed("batched", ours(True))
        log(f"  sweep round {r + 1}/{repeats}")
    diff_batch = float((torch.tensor(batched.values) - torch.tensor(single.values)).abs().max())
    rows.append(ratio_row("hookscope sweep (one by one)", seconds["single"], ratios["single"],
                     1.10, f"{single.forwards['intervened']} forwards of one input, "
                           "each cell its compare() bit for bit"))
    rows.append(ratio_row("hookscope sweep (batched)", seconds["batched"], ratios["batched"],
                     None, f"{batched.batch['forwards']} forwards of up to "
                           f"{batched.batch['rows']} rows; max |batched - one by one| "
                           f"{diff_batch:.2g}"))
    tl_ver = tl_version() if peers else "not run (--no-peers)"
    meta = {"layers": layers, "tokens": tokens, "cells": cells, "repeats": repeats,
            "plain_ms": statistics.median(plains) * 1e3,
            "torch": torch.__version__, "transformers": transformers.__version__,
            "transformer_lens": tl_ver, "threads": torch.get_num_threads(),
            "clock": "cpu" if now is time.process_time else "wall"}
    if tl_ver is None or tl_ver.startswith("not "):
        rows.append({"name": "transformer_lens", "note": f"skipped: TransformerLens {tl_ver}; "
                     f"{INSTALL}"})
        return {"meta": meta, "rows": rows}
    from transformer_lens import patching

    patching.tqdm = lambda it, **_: it  # type: ignore[attr-defined]  # no progress bars on stderr
    tl = tl_gpt2(model)
    with torch.inference_mode():
        want = model(clean).logits
        got = tl(clean)
    logits_diff = float((want - got).abs().max())
    if logits_diff > 1e-3:
        rows.append({"name": "transformer_lens", "note": f"skipped: its logits differ from the "
                     f"Hugging Face model's by {logits_diff:.3g} (weights not loaded alike)"})
        return {"meta": meta, "rows": rows}

    def tl_metric(logits: torch.Tensor) -> torch.Tensor:
        return logits[0, -1, g.a_tok] - logits[0, -1, g.b_tok]

    def theirs() -> Any:
        with torch.inference_mode():
            _, cache = tl.run_with_cache(clean)
            return patching.get_act_patch_resid_pre(tl, x, cache, tl_metric)

    grid = theirs()

    def tl_plain() -> Any:
        with torch.inference_mode():
            return tl(x)

    tl_fwd = median_seconds(tl_plain, max(5, cells // 8), now)
    for _ in range(repeats):
        timed("tl", theirs)
    vs = float((grid.double() - torch.tensor(single.values)).abs().max())
    rows.append(ratio_row(f"transformer_lens {tl_ver}", seconds["tl"], ratios["tl"], None,
                     f"run_with_cache + get_act_patch_resid_pre; its own plain forward "
                     f"{tl_fwd * 1e3:.1f} ms; logits equal the HF model's to {logits_diff:.1g}; "
                     f"max |TL - hookscope| over the grid {vs:.2g}"))
    return {"meta": meta, "rows": rows}


def render(result: dict) -> str:
    m = result["meta"]
    lines = [f"Sweep: layers x positions residual patching, HF GPT-2 shape ({m['layers']} layers, "
             f"768 wide, random weights), {m['tokens']} tokens, {m['cells']} cells; plain forward "
             f"{m['plain_ms']:.1f} ms; torch {m['torch']}, transformers {m['transformers']}, "
             f"TransformerLens {m['transformer_lens']}, {m['threads']} threads, {m['clock']} "
             f"clock, {m['repeats']} rounds",
             f"{'row':<34}{'seconds':>9}{'/ (cells x plain)':>22}{'target':>15}  note"]
    for r in result["rows"]:
        if "seconds" not in r:
            lines.append(f"{r['name']:<34}{'':>9}{'':>22}{'':>15}  {r['note']}")
            continue
        target = (f"<= {r['target']:.2f} {'OK' if r['met'] else 'MISSED'}"
                  if "target" in r else "")
        lo, hi = r["ratio_range"]
        ratio = f"{r['ratio']:.3f} [{lo:.2f}-{hi:.2f}]"
        lines.append(f"{r['name']:<34}{r['seconds']:>9.2f}{ratio:>22}{target:>15}  {r['note']}")
    return "\n".join(lines)


if __name__ == "__main__":  # python -m bench.sweep_bench [--quick] [--cpu-clock]
    import sys

    clock = time.process_time if "--cpu-clock" in sys.argv else time.perf_counter
    print(render(run(quick="--quick" in sys.argv, log=lambda s: print(s, file=sys.stderr),
                     now=clock)))
