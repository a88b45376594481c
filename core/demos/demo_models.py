"""Built-in demo models of Hookscope, each with a fixed example input.

Pure torch (never imports Qt). Every demo is a zero-argument factory that
returns ``(module_in_eval_mode, example_input)``:

- ``clamp``: the "modify activations with a forward hook" exercise,
  ``torch.manual_seed(42)`` then ``Sequential(Linear(3, 4), Linear(4, 2))``.
- ``features``: the "feature extraction with hooks" exercise,
  ``torch.manual_seed(42)`` then a named ``fc1/relu1/fc2/relu2/fc3`` Sequential.
- ``cnn``: :class:`DigitsCNN`, a small CNN trained on sklearn's 8x8 digits,
  with one shipped test image.
- ``transformer``: :class:`TinyTransformer`, a 2-layer encoder trained to sort
  a sequence of tokens, with one shipped unsorted sequence.
- ``lm``: :class:`~.demo_lm.TinyLM`, a character-level language model with its
  own tokenizer (:mod:`.demo_lm`, trained by ``resources/train_lm.py``).
- ``detector``: :class:`~.demo_detector.TinyDetector`, a constructed conv
  detector with torchvision's output (boxes, labels, scores per image) and a
  sample picture (:mod:`.demo_detector`, written by ``resources/make_detector.py``).

The weights and samples live in ``hookscope.resources`` and are produced by
``python resources/train_demos.py``.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from importlib.resources import files
from typing import Any, Callable

import numpy as np
import torch
from torch import nn
from safetensors.torch import load

from .demo_detector import DETECTOR_DESCRIPTION, detector_demo
from .demo_lm import LM_DESCRIPTION, lm_demo

__all__ = [
    "DEMOS",
    "DEMO_DESCRIPTIONS",
    "DigitsCNN",
    "TinyTransformer",
    "clamp_demo",
    "features_demo",
    "cnn_demo",
    "transformer_demo",
    "resource_path",
]

_RESOURCES = "hookscope.resources"

CNN_WEIGHTS = "digits_cnn.safetensors"
CNN_SAMPLE = "digits_sample.npy"
CNN_SAMPLE_META = "digits_sample.json"
TRANSFORMER_WEIGHTS = "tiny_transformer.safetensors"
TRANSFORMER_SAMPLE = "transformer_sample.json"


def resource_path(name: str) -> Any:
    """Return a Traversable for the file ``name`` in ``hookscope.resources``."""
    return files(_RESOURCES).joinpath(name)


def _load_state_dict(module: nn.Module, name: str) -> None:
    state = load(resource_path(name).read_bytes())
    module.load_state_dict(state)


# ---------------------------------------------------------------------------
# The two exercises
# ---------------------------------------------------------------------------


def clamp_demo() -> tuple[nn.Module, torch.Tensor]:
    """Seeded ``Sequential(Linear(3, 4), Linear(4, 2))`` and input ``[[1, 2, 3]]``."""
    torch.manual_seed(42)
    model = nn.Sequential(nn.Linear(3, 4), nn.Linear(4, 2))
    model.eval()
    x = torch.tensor([[1.0, 2.0, 3.0]])
    return model, x


def features_demo() -> tuple[nn.Module, torch.Tensor]:
    """Seeded named ``fc1/relu1/fc2/relu2/fc3`` Sequential and input ``[[1, 2, 3, 4]]``."""
    torch.manual_seed(42)
    model = nn.Sequential(
        OrderedDict(
            fc1=nn.Linear(4, 8),
            relu1=nn.ReLU(),
            fc2=nn.Linear(8, 4),
            relu2=nn.ReLU(),
            fc3=nn.Linear(4, 2),
        )
    )
    model.eval()
    x = torch.tensor([[1.0, 2.0, 3.0, 4.0]])
    return model, x


# ---------------------------------------------------------------------------
# Digits CNN
# ---------------------------------------------------------------------------


class DigitsCNN(nn.Module):
    """Small CNN for 1x8x8 digit images (sklearn ``load_digits``), 10 classes.

    The ReLUs are in place on purpose: capturing ``bn1``/``bn2`` must copy the
    output before the following ReLU overwrites it.
    """

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(1, 8, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(8)
        self.relu1 = nn.ReLU(inplace=True)
        self.pool1 = nn.MaxPool2d(2)
        self.conv2 = nn.Conv2d(8, 16, 3, padding=1)
        self.bn2 = nn.BatchNorm2d(16)
        self.relu2 = nn.ReLU(inplace=True)
        self.pool2 = nn.MaxPool2d(2)
        self.flatten = nn.Flatten()
        self.fc = nn.Linear(64, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.pool1(self.relu1(self.bn1(self.conv1(x))))
        x = self.pool2(self.relu2(self.bn2(self.conv2(x))))
        return self.fc(self.flatten(x))


def cnn_sample_label() -> int:
    """The true label of the shipped digits sample."""
    meta = json.loads(resource_path(CNN_SAMPLE_META).read_text(encoding="utf-8"))
    return int(meta["label"])


def cnn_demo() -> tuple[nn.Module, torch.Tensor]:
    """Trained :class:`DigitsCNN` (eval mode) and one test image, shape (1, 1, 8, 8)."""
    model = DigitsCNN()
    _load_state_dict(model, CNN_WEIGHTS)
    model.eval()
    with resource_path(CNN_SAMPLE).open("rb") as fh:
        arr = np.load(fh)
    x = torch.from_numpy(np.ascontiguousarray(arr, dtype=np.float32)).reshape(1, 1, 8, 8)
    return model, x


# ---------------------------------------------------------------------------
# Tiny transformer
# ---------------------------------------------------------------------------


class TinyTransformer(nn.Module):
    """Token model: embedding + learned positions, 2 encoder layers, LayerNorm, head.

    Input: LongTensor ``(batch, seq)`` with ``seq <= max_len`` and tokens in
    ``[0, vocab)``. Output: logits ``(batch, seq, vocab)``.
    """

    def __init__(
        self,
        vocab: int = 16,
        d_model: int = 32,
        max_len: int = 16,
        nhead: int = 4,
        dim_feedforward: int = 64,
        num_layers: int = 2,
    ) -> None:
        super().__init__()
        self.max_len = max_len
        self.embed = nn.Embedding(vocab, d_model)
        self.pos = nn.Parameter(torch.zeros(1, max_len, d_model))
        nn.init.normal_(self.pos, std=0.02)
        layer = nn.TransformerEncoderLayer(
            d_model=d_model,
            nhead=nhead,
            dim_feedforward=dim_feedforward,
            dropout=0.0,
            batch_first=True,
        )
        self.encoder = nn.TransformerEncoder(
            layer, num_layers=num_layers, enable_nested_tensor=False
        )
        self.norm = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        seq = tokens.shape[1]
        if seq > self.max_len:
            raise ValueError(f"sequence length {seq} exceeds max_len {self.max_len}")
        x = self.embed(tokens) + self.pos[:, :seq]
        x = self.encoder(x)
        return self.head(self.norm(x))


def transformer_sample() -> dict[str, Any]:
    """The shipped transformer sample: ``{"tokens": [...], "task": "..."}``."""
    return json.loads(resource_path(TRANSFORMER_SAMPLE).read_text(encoding="utf-8"))


def transformer_demo() -> tuple[nn.Module, torch.Tensor]:
    """Trained :class:`TinyTransformer` (eval mode) and a fixed (1, 12) token sequence."""
    model = TinyTransformer()
    _load_state_dict(model, TRANSFORMER_WEIGHTS)
    model.eval()
    tokens = transformer_sample()["tokens"]
    x = torch.tensor([tokens], dtype=torch.long)
    return model, x


# ---------------------------------------------------------------------------
# Registry
# ---------------------------------------------------------------------------

DEMOS: dict[str, Callable[[], tuple[nn.Module, Any]]] = {
    "clamp": clamp_demo,
    "features": features_demo,
    "cnn": cnn_demo,
    "transformer": transformer_demo,
    "lm": lm_demo,
    "detector": detector_demo,
}

DEMO_DESCRIPTIONS: dict[str, str] = {
    "clamp": "Two seeded Linear layers (3 -> 4 -> 2): clamp the first layer's output and watch the result change.",
    "features": "A seeded five-layer MLP (fc1, relu1, fc2, relu2, fc3): capture the three Linear outputs in one pass.",
    "cnn": "A small CNN trained on 8x8 handwritten digits, shown one test digit it classifies correctly.",
    "transformer": "A two-layer transformer trained to sort 12 tokens: each position outputs the sorted token at that place.",
    "lm": LM_DESCRIPTION,
    "detector": DETECTOR_DESCRIPTION,
}
