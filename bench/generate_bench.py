"""The generation case: a new input shape's first ``compare()``, and generation with an
intervention against a cached ``transformers`` ``generate()``.

Rows, each the median of ``repeats`` rounds on the bench's clock:

* ``new shape, first compare()`` on ``demo:lm`` and on the GPT-2 shape (Hugging Face's
  ``GPT2LMHeadModel`` from a config, random weights; 6 layers, 768 wide; quick: 2 layers;
  smoke: 2 layers, 64 wide): ``compare()`` with a capture and a clamp on a prompt of a
  length this process has not run yet, against the same call again on that prompt (the
  steady state), each round a new length. Target: the first costs at most one plain
  forward plus 3 ms more than the steady one (the model itself was run before: this is
  what a new length costs, not a new model).
* ``generate`` on the GPT-2 shape: 64 tokens after a 60-token prompt (quick: 16 after 30;
  smoke: 4 after 8), both continuations (without and with a patch of the prompt's last
  token at block 2), against one greedy cached ``model.generate()`` of as many tokens.
  Target ≤ 3×. The check: Hookscope's continuation without the plan is the ids
  ``generate()`` chose.
* ``generate`` on ``demo:lm``: 20 tokens after its prompt, with a patch; target ≤ 500 ms.
* ``generate (no cache)`` on the GPT-2 shape: the full loop, for reference, no target.
"""

from __future__ import annotations

import statistics
import time
from typing import Any, Callable

import torch

from hookscope.core import At, Clamp, Patch, Plan, compare, generate, load_model
from hookscope.core.base.meaning import TOKENS, OutputMeaning

from .timing import case_main, clock_name, inference_forward, median_seconds, timed_call

SEED = 0


def _gpt2(layers: int, width: int, vocab: int) -> Any:
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(SEED)
    cfg = GPT2Config(n_layer=layers, n_embd=width, n_head=max(1, width // 64), n_positions=1024,
                     vocab_size=vocab)
    return GPT2LMHeadModel(cfg).eval()


def _ids(vocab: int, n: int, seed: int) -> torch.Tensor:
    return torch.randint(0, vocab, (1, n), generator=torch.Generator().manual_seed(seed))


def new_shape_row(name: str, module: Any, make: Callable[[int], Any], plan: Plan,
                  lengths: list[int], now: Callable[[], float]) -> dict:
    """First ``compare()`` on each new length against the same call again."""
    compare(module, make(lengths[0] - 1), plan)  # the model's own first run, learnt before
    firsts, steadies, plains = [], [], []
    for n in lengths:
        x = make(n)
        first, _ = timed_call(lambda: compare(module, x, plan), now)
        steady, _ = timed_call(lambda: compare(module, x, plan), now)

        plains.append(median_seconds(inference_forward(module, x), 3, now))
        firsts.append(first)
        steadies.append(steady)
    extra = [f - s for f, s in zip(firsts, steadies)]
    plain_ms = statistics.median(plains) * 1e3
    limit = plain_ms + 3.0
    got = statistics.median(extra) * 1e3
    return {"name": f"new shape, first compare(): {name}",
            "ms": statistics.median(firsts) * 1e3, "ref_ms": statistics.median(steadies) * 1e3,
            "value": got, "unit": "ms more", "target": limit, "met": got <= limit,
            "note": f"first on a new length − steady, median of {len(lengths)} lengths "
                    f"({lengths[0]}..{lengths[-1]}); target: one plain forward "
                    f"({plain_ms:.2f} ms) + 3 ms"}


def run(quick: bool = False, repeats: int = 3, log: Callable[[str], None] = print,
        now: Callable[[], float] = time.perf_counter, smoke: bool = False) -> dict:
    """Time the rows (see the module docstring); returns ``{"meta": ..., "rows": [...]}``."""
    import transformers

    layers, width, vocab = (2, 64, 512) if smoke else (2, 768, 50257) if quick else (6, 768, 50257)
    prompt, n_new = (8, 4) if smoke else (30, 16) if quick else (60, 64)
    rows: list[dict] = []
    lm = load_model("demo:lm")
    codec = lm.meaning.codec
    text = "the cat sat on the mat. the dog sat on the log. a cat sat on a hat. "
    clamp = Plan(capture=("blocks.0", "blocks.1.mlp")).with_intervention("blocks.0",
                                                                         Clamp(-0.5, 0.5))
    rounds = max(2, repeats) if smoke else max(5, 3 * repeats)
    demo_lengths = list(range(10, 10 + rounds))
    rows.append(new_shape_row("demo:lm", lm.module,
                              lambda n: torch.tensor([codec.encode(text[:n])]), clamp,
                              demo_lengths, now))
    log(f"  generate: {rows[-1]['name']} {rows[-1]['value']:.2f} ms more")
    model = _gpt2(layers, width, vocab)
    gpt_clamp = Plan(capture=("transformer.h.0", f"transformer.h.{layers - 1}.mlp")
                     ).with_intervention("transformer.h.0", Clamp(-0.5, 0.5))

    def gpt_input(n: int) -> dict:
        ids = _ids(vocab, n, SEED + n)
        return {"input_ids": ids, "attention_mask": torch.ones_like(ids)}

    rows.append(new_shape_row(f"GPT-2 shape ({layers} layers, {width} wide)", model, gpt_input,
                              gpt_clamp, list(range(16, 16 + rounds)), now))
    log(f"  generate: {rows[-1]['name']} {rows[-1]['value']:.2f} ms more")

    meaning = OutputMeaning(kind=TOKENS, field="logits")
    ids = _ids(vocab, prompt, SEED + 1)
    source = _ids(vocab, prompt + 3, SEED + 2)
    x = {"input_ids": ids, "attention_mask": torch.ones_like(ids)}
    patch = Plan().with_intervention(f"transformer.h.{min(2, layers - 1)}",
                                     Patch(source, at=At(positions=-1)))

    def theirs() -> torch.Tensor:
        with torch.inference_mode():
            return model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=n_new,
                                  min_new_tokens=n_new, do_sample=False, pad_token_id=0)

    def ours(cache: bool = True) -> Any:
        return generate(model, x, patch, meaning, n_new, cache=cache)

    theirs()
    ours()
    t_theirs, t_ours, t_full = [], [], []
    for _ in range(repeats):
        s, want = timed_call(theirs, now)
        t_theirs.append(s)
        s, got = timed_call(ours, now)
        t_ours.append(s)
    same = want[0, prompt:].tolist() == got.without.ids
    ratio = statistics.median(o / t for o, t in zip(t_ours, t_theirs))
    rows.append({"name": f"generate {n_new} after {prompt}, GPT-2 shape",
                 "ms": statistics.median(t_ours) * 1e3, "ref_ms": statistics.median(t_theirs) * 1e3,
                 "value": ratio, "unit": "x generate()", "target": 3.0, "met": ratio <= 3.0,
                 "correct": same,
                 "note": f"both continuations (with: patch@pos=-1 at block {min(2, layers - 1)}), "
                         f"KV cache {'used' if got.with_.cached else 'NOT used'}; "
                         f"without = generate()'s ids: {same}"})
    log(f"  generate: {rows[-1]['name']} {ratio:.2f}x")
    for _ in range(max(1, repeats // 2)):
        t_full.append(timed_call(lambda: ours(False), now)[0])
    full = statistics.median(t_full)
    rows.append({"name": f"generate {n_new} after {prompt}, GPT-2 shape, no cache",
                 "ms": full * 1e3, "ref_ms": statistics.median(t_theirs) * 1e3,
                 "value": full / statistics.median(t_theirs), "unit": "x generate()",
                 "note": "the full loop (--no-cache), for reference"})

    demo_x = torch.tensor([codec.encode("the cat sat on the ")])
    demo_plan = Plan().with_intervention("blocks.1", Patch("text:the dog sat on the ",
                                                           at=At(positions=-1)))
    generate(lm.module, demo_x, demo_plan, lm.meaning, 20)
    t_demo = [timed_call(lambda: generate(lm.module, demo_x, demo_plan, lm.meaning, 20), now)[0]
              for _ in range(repeats)]
    ms = statistics.median(t_demo) * 1e3
    rows.append({"name": "generate 20, demo:lm", "ms": ms, "value": ms, "unit": "ms",
                 "target": 500.0, "met": ms <= 500.0,
                 "note": "both continuations, patch@pos=-1 at blocks.1 (no KV cache: the full "
                         "loop)"})
    meta = {"layers": layers, "width": width, "prompt": prompt, "new_tokens": n_new,
            "repeats": repeats, "torch": torch.__version__,
            "transformers": transformers.__version__, "threads": torch.get_num_threads(),
            "clock": clock_name(now)}
    return {"meta": meta, "rows": rows}


def render(result: dict) -> str:
    m = result["meta"]
    lines = [f"Generation and new shapes: GPT-2 shape ({m['layers']} layers, {m['width']} wide, "
             f"random weights), {m['new_tokens']} tokens after {m['prompt']}; torch {m['torch']}, "
             f"transformers {m['transformers']}, {m['threads']} threads, {m['clock']} clock, "
             f"{m['repeats']} rounds",
             f"{'row':<62}{'ms':>10}{'ref ms':>10}{'value':>20}{'target':>17}  note"]
    for r in result["rows"]:
        target = (f"<= {r['target']:.2f} {'OK' if r['met'] else 'MISSED'}" if "target" in r
                  else "")
        ref = f"{r['ref_ms']:.1f}" if "ref_ms" in r else ""
        value = f"{r['value']:.2f} {r['unit']}"
        lines.append(f"{r['name']:<62}{r['ms']:>10.1f}{ref:>10}{value:>20}{target:>17}  {r['note']}")
    return "\n".join(lines)


if __name__ == "__main__":  # python -m bench.generate_bench [--quick] [--smoke] [--cpu-clock]
    case_main(run, render)
