"""The diff case: a model against itself in bfloat16, every leaf compared call by call.

Two models: torchvision's ResNet-18 layout (:mod:`bench.models_vision`, seeded random
weights, one 224² image; quick mode 128², smoke mode 32²) and Hugging Face's
``GPT2LMHeadModel`` in the GPT-2-small shape (12 layers, d=768, 12 heads, vocabulary
50257, random weights; 16 tokens; quick mode 4 layers, 8 tokens; smoke mode 2 layers,
64 wide). Model B is a bfloat16 copy of A, made once, outside the timing.

Each row is the median over rounds of ``hookscope.core.diff(A, B, x)`` (A's forward
keeping every leaf's output, B's forward comparing each of its leaves against A's as it
runs, the outputs compared by meaning) over the two plain forwards it replaces (``A(x)``
and ``B(x)`` under ``inference_mode``, medians timed in the same round); target ≤ 1.3.
"""

from __future__ import annotations

import copy
import statistics
import time
from typing import Any, Callable

import torch

from hookscope.core import diff
from hookscope.core.base import OutputMeaning, TOKENS

from .timing import case_main, clock_name, inference_forward, rounds_against_plain

SEED = 0
TARGET = 1.3


def resnet18(side: int) -> tuple[torch.nn.Module, torch.Tensor, OutputMeaning | None]:
    from .models_vision import BasicBlock, ResNet

    torch.manual_seed(SEED)
    return ResNet(BasicBlock, (2, 2, 2, 2)).eval(), torch.rand(1, 3, side, side), None


def gpt2(layers: int, width: int, tokens: int) -> tuple[torch.nn.Module, Any, OutputMeaning]:
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(SEED)
    cfg = GPT2Config(n_layer=layers, n_embd=width, n_head=12 if width % 12 == 0 else 4,
                     n_positions=1024, vocab_size=50257)
    model = GPT2LMHeadModel(cfg).eval()
    ids = torch.randint(0, 50257, (1, tokens), generator=torch.Generator().manual_seed(SEED + 1))
    return model, {"input_ids": ids}, OutputMeaning(kind=TOKENS, field="logits")


def _case(name: str, a: torch.nn.Module, x: Any, meaning: OutputMeaning | None, repeats: int,
          now: Callable[[], float], log: Callable[[str], None]) -> dict:
    b = copy.deepcopy(a).to(torch.bfloat16)
    xb = {k: v for k, v in x.items()} if isinstance(x, dict) else x.to(torch.bfloat16)
    plains = [inference_forward(a, x), inference_forward(b, xb)]

    def ours() -> Any:
        return diff(a, b, x, meaning=meaning)

    for _ in range(2):  # warm-up
        for plain in plains:
            plain()
    got = ours()

    def progress(r: int, seconds: dict[str, list[float]], plain_s: list[float]) -> None:
        log(f"  diff {name} round {r}/{repeats}: {seconds['diff'][-1] * 1e3:.1f} ms / "
            f"{plain_s[-1] * 1e3:.1f} ms")

    times, ratio_lists, plain_s = rounds_against_plain(plains, {"diff": ours}, repeats, now, 3,
                                                       progress)
    seconds, ratios = times["diff"], ratio_lists["diff"]
    rels = [row.relative_change for row in got.layers]
    ratio = statistics.median(ratios)
    first = got.first_divergent
    return {"name": name, "seconds": statistics.median(seconds), "ratio": ratio,
            "ratio_range": [min(ratios), max(ratios)], "target": TARGET, "met": ratio <= TARGET,
            "plain_ms": statistics.median(plain_s) * 1e3, "rows": len(got.layers),
            "relative_change": [min(rels), statistics.median(rels), max(rels)],
            "note": f"{len(got.layers)} aligned calls; relative change min/median/max "
                    f"{min(rels):.2g}/{statistics.median(rels):.2g}/{max(rels):.2g}; first past "
                    f"{got.tolerance:g}: {first.path if first else 'none'}"}


def run(quick: bool = False, repeats: int = 3, log: Callable[[str], None] = print,
        now: Callable[[], float] = time.perf_counter, smoke: bool = False) -> dict:
    """Time both rows; ``{"meta": ..., "rows": [...]}`` (see :func:`render`)."""
    import transformers

    side = 32 if smoke else 128 if quick else 224
    layers, width, tokens = (2, 64, 4) if smoke else (4, 768, 8) if quick else (12, 768, 16)
    rows = []
    a, x, meaning = resnet18(side)
    rows.append(_case(f"resnet18 {side}x{side}", a, x, meaning, repeats, now, log))
    m, ids, meaning = gpt2(layers, width, tokens)
    rows.append(_case(f"gpt2 {layers}x{width}, {tokens} tokens", m, ids, meaning, repeats, now,
                      log))
    meta = {"repeats": repeats, "torch": torch.__version__,
            "transformers": transformers.__version__, "threads": torch.get_num_threads(),
            "clock": clock_name(now), "smoke": smoke,
            "quick": quick}
    return {"meta": meta, "rows": rows}


def render(result: dict) -> str:
    m = result["meta"]
    lines = [f"Diff: a model against its bfloat16 copy, every leaf compared; torch {m['torch']}, "
             f"transformers {m['transformers']}, {m['threads']} threads, {m['clock']} clock, "
             f"{m['repeats']} rounds",
             f"{'row':<34}{'seconds':>9}{'/ (A + B plain)':>22}{'target':>15}  note"]
    for r in result["rows"]:
        lo, hi = r["ratio_range"]
        ratio = f"{r['ratio']:.3f} [{lo:.2f}-{hi:.2f}]"
        target = f"<= {r['target']:.2f} {'OK' if r['met'] else 'MISSED'}"
        lines.append(f"{r['name']:<34}{r['seconds']:>9.3f}{ratio:>22}{target:>15}  {r['note']}")
    return "\n".join(lines)


if __name__ == "__main__":  # python -m bench.diff_bench [--quick] [--smoke] [--cpu-clock]
    case_main(run, render)
