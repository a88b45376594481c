"""Train ``demo:lm`` and write its weights and sample prompts.

Run by hand from the repository root (pure torch, no extra package)::

    python resources/train_lm.py

It writes, next to this file:

- ``tiny_lm.safetensors``: :class:`hookscope.core.demos.demo_lm.TinyLM` trained to
  predict the next character of template sentences in which the subject
  decides the rest ("the cat sat on the mat.", "the dog sat on the log.",
  "the cat likes milk."). Next-character accuracy on the place/food word is
  printed.
- ``lm_sample.json``: the demo's prompt ("the cat sat on the "), a second
  prompt of the same length that differs in the subject only ("the dog sat
  on the "), for patching one into the other, and a sentence on the task.

Seeded, CPU only, well under a minute on one free core.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import torch
from safetensors.torch import save_file
from torch import nn

from hookscope.core.demos.demo_lm import CODEC, LM_SAMPLE, LM_WEIGHTS, TinyLM

HERE = Path(__file__).resolve().parent
SEED = 0
# subject -> (place it sits on, what it likes); all subjects are three letters,
# so two prompts that differ in the subject have the same length
SUBJECTS = {"cat": ("mat", "milk"), "dog": ("log", "bones"), "owl": ("branch", "mice"),
            "pig": ("mud", "apples"), "cow": ("grass", "hay"), "bee": ("flower", "honey"),
            "fox": ("hill", "grapes"), "ant": ("leaf", "sugar")}
PEOPLE = ["anna", "ben", "cleo", "dan", "eve", "finn"]


def corpus() -> list[str]:
    lines = []
    for s, (place, food) in SUBJECTS.items():
        lines += [f"the {s} sat on the {place}.", f"the {s} likes {food}.",
                  f"a {s} sat on a {place}.", f"the {s} ate the {food}."]
        lines += [f"{p} saw the {s} on the {place}." for p in PEOPLE]
        lines += [f"{p} gave the {s} some {food}." for p in PEOPLE]
    return lines


def batches(lines: list[str], gen: torch.Generator, size: int = 64):
    ids = [CODEC.encode(line + "\n") for line in lines]
    n = max(len(i) for i in ids)
    pad = CODEC.encode("\n")[0]
    data = torch.full((len(ids), n), pad, dtype=torch.long)
    for row, i in enumerate(ids):
        data[row, : len(i)] = torch.tensor(i)
    while True:
        yield data[torch.randint(0, len(ids), (size,), generator=gen)]


def main() -> None:
    torch.set_num_threads(1)  # a tiny model: more threads only contend
    torch.manual_seed(SEED)
    gen = torch.Generator().manual_seed(SEED)
    lines = corpus()
    model = TinyLM()
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)
    loss_fn = nn.CrossEntropyLoss()
    t0 = time.perf_counter()
    stream = batches(lines, gen)
    for step in range(400):
        x = next(stream)
        logits = model(x[:, :-1])
        loss = loss_fn(logits.reshape(-1, logits.shape[-1]), x[:, 1:].reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % 100 == 0:
            print(f"  step {step:4d}  loss {loss.item():.3f}")
    model.eval()
    right = 0
    for s, (place, _) in SUBJECTS.items():
        prompt = f"the {s} sat on the "
        with torch.no_grad():
            nxt = model(torch.tensor([CODEC.encode(prompt)])).argmax(-1)[0, -1]
        right += CODEC.decode([int(nxt)]) == place[0]
    print(f"  first letter of the place right for {right}/{len(SUBJECTS)} subjects "
          f"({time.perf_counter() - t0:.0f} s)")
    state = {k: v.detach().contiguous().clone() for k, v in model.state_dict().items()}
    save_file(state, str(HERE / LM_WEIGHTS))
    print(f"  wrote {LM_WEIGHTS} ({(HERE / LM_WEIGHTS).stat().st_size / 1024:.1f} KiB)")
    sample = {"prompt": "the cat sat on the ", "other": "the dog sat on the ",
              "task": "next character: the subject (cat, dog, ...) decides the place it sits on"}
    (HERE / LM_SAMPLE).write_text(json.dumps(sample, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
