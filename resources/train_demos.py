"""Train the built-in demo models and write their weights and samples.

Run by hand from the repository root (needs scikit-learn, the ``train`` extra)::

    python resources/train_demos.py

It writes, next to this file:

- ``digits_cnn.safetensors``: :class:`hookscope.core.demos.demo_models.DigitsCNN`
  trained on sklearn's ``load_digits()`` (pixels / 16.0), fixed seed, a few
  epochs of Adam; test accuracy is printed.
- ``digits_sample.npy``: one test image, float32, shape (1, 1, 8, 8), that the
  trained model classifies correctly, and ``digits_sample.json`` with its
  ``label`` and ``source``.
- ``tiny_transformer.safetensors``:
  :class:`hookscope.core.demos.demo_models.TinyTransformer` trained to sort: given 12
  distinct tokens from 1..15, position i outputs the i-th smallest token.
  Attention has to compare every token with every other one to do this, which
  makes its patterns worth looking at. Accuracy is printed.
- ``transformer_sample.json``: the fixed unsorted sequence used as the demo's
  example input, and a sentence describing the task.

Everything is seeded, runs on CPU, and takes well under a minute per model.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import torch
from safetensors.torch import save_file
from torch import nn

from hookscope.core.demos.demo_models import DigitsCNN, TinyTransformer

HERE = Path(__file__).resolve().parent
SEED = 0


def _save(module: nn.Module, path: Path) -> None:
    state = {k: v.detach().contiguous().clone() for k, v in module.state_dict().items()}
    save_file(state, str(path))
    print(f"  wrote {path.name} ({path.stat().st_size / 1024:.1f} KiB)")


def train_cnn() -> None:
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    print("DigitsCNN on sklearn load_digits")
    t0 = time.perf_counter()
    digits = load_digits()
    x = (digits.images / 16.0).astype(np.float32)[:, None, :, :]
    y = digits.target.astype(np.int64)
    idx = np.arange(len(y))
    idx_train, idx_test = train_test_split(
        idx, test_size=0.2, random_state=SEED, stratify=y
    )
    x_train, y_train = torch.from_numpy(x[idx_train]), torch.from_numpy(y[idx_train])
    x_test, y_test = torch.from_numpy(x[idx_test]), torch.from_numpy(y[idx_test])

    torch.manual_seed(SEED)
    model = DigitsCNN()
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    loss_fn = nn.CrossEntropyLoss()
    gen = torch.Generator().manual_seed(SEED)
    for epoch in range(15):
        model.train()
        perm = torch.randperm(len(x_train), generator=gen)
        for i in range(0, len(perm), 64):
            b = perm[i : i + 64]
            opt.zero_grad()
            loss = loss_fn(model(x_train[b]), y_train[b])
            loss.backward()
            opt.step()
    model.eval()
    with torch.no_grad():
        pred = model(x_test).argmax(1)
    acc = (pred == y_test).float().mean().item()
    print(f"  test accuracy: {acc:.4f} ({len(y_test)} images), {time.perf_counter() - t0:.1f}s")

    # The first test image the model gets right, so the demo shows a success.
    correct = (pred == y_test).nonzero().flatten()
    j = int(correct[0])
    sample = x_test[j : j + 1].numpy().astype(np.float32)
    assert sample.shape == (1, 1, 8, 8)
    label = int(y_test[j])
    _save(model, HERE / "digits_cnn.safetensors")
    np.save(HERE / "digits_sample.npy", sample)
    meta = {
        "label": label,
        "source": f"sklearn load_digits test split index {j}",
        "dataset_index": int(idx_test[j]),
        "split": f"train_test_split(test_size=0.2, random_state={SEED}, stratify=target)",
    }
    (HERE / "digits_sample.json").write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
    print(f"  sample: test index {j} (dataset index {idx_test[j]}), label {label}")


SEQ_LEN = 12
TASK = (
    "sort: the input is 12 distinct tokens from 1..15; the output at position i "
    "is the i-th smallest input token"
)
SAMPLE_TOKENS = [9, 3, 14, 1, 7, 12, 5, 11, 2, 15, 6, 10]


def _sort_batch(n: int, gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    keys = torch.rand(n, 15, generator=gen)
    tokens = keys.argsort(dim=1)[:, :SEQ_LEN] + 1  # distinct tokens in 1..15
    return tokens, tokens.sort(dim=1).values


def train_transformer() -> None:
    print("TinyTransformer on sorting")
    t0 = time.perf_counter()
    torch.manual_seed(SEED)
    model = TinyTransformer()
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    loss_fn = nn.CrossEntropyLoss()
    gen = torch.Generator().manual_seed(SEED)
    steps = 1500
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=3e-3, total_steps=steps)
    model.train()
    for step in range(steps):
        x, y = _sort_batch(128, gen)
        opt.zero_grad()
        loss = loss_fn(model(x).reshape(-1, 16), y.reshape(-1))
        loss.backward()
        opt.step()
        sched.step()
        if (step + 1) % 500 == 0:
            print(f"  step {step + 1}: loss {loss.item():.4f}")
    model.eval()
    x, y = _sort_batch(2000, torch.Generator().manual_seed(SEED + 1))
    with torch.no_grad():
        pred = model(x).argmax(-1)
    tok_acc = (pred == y).float().mean().item()
    seq_acc = (pred == y).all(dim=1).float().mean().item()
    print(
        f"  held-out accuracy: {tok_acc:.4f} per token, {seq_acc:.4f} whole sequence, "
        f"{time.perf_counter() - t0:.1f}s"
    )
    with torch.no_grad():
        out = model(torch.tensor([SAMPLE_TOKENS])).argmax(-1)[0].tolist()
    print(f"  sample {SAMPLE_TOKENS} -> {out}")
    _save(model, HERE / "tiny_transformer.safetensors")
    sample = {"tokens": SAMPLE_TOKENS, "task": TASK}
    (HERE / "transformer_sample.json").write_text(
        json.dumps(sample, indent=2) + "\n", encoding="utf-8"
    )


def main() -> None:
    torch.set_num_threads(min(2, torch.get_num_threads()))
    train_cnn()
    train_transformer()


if __name__ == "__main__":
    main()
