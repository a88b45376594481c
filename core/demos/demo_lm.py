"""``demo:lm``: a tiny character-level language model with its own tokenizer.

:class:`TinyLM` is a 2-block GPT-style decoder (causal self-attention
written out with named submodules, so ``blocks.0.attn.probs`` is the
attention pattern and ``blocks.0.attn``/``blocks.0.mlp`` are hookable),
trained by ``python resources/train_lm.py`` on short template sentences
("the cat sat on the mat.", "the dog sat on the log."): the subject decides
the place, so patching the subject's activations from one prompt into
another changes the predicted word. The tokenizer is :data:`CODEC`, one
token per character, so ``text:`` inputs and token views work with no extra
package. Pure torch, no Qt.
"""

from __future__ import annotations

import json
import math
from importlib.resources import files
from typing import Any

import torch
from torch import nn
from safetensors.torch import load

from ..base.meaning import CLASSES, TOKENS, OutputMeaning
from ..base.text_codec import CharCodec
from .demo_detector import detector_meaning

ALPHABET = "?\n .,'abcdefghijklmnopqrstuvwxyz"
CODEC = CharCodec(ALPHABET, lower=True)
LM_WEIGHTS = "tiny_lm.safetensors"
LM_SAMPLE = "lm_sample.json"
LM_DESCRIPTION = ("A tiny character-level language model (2 attention blocks) trained on template "
                  "sentences: the subject decides the place ('the cat sat on the' -> 'mat'). "
                  "Type text:... as input; patch between two prompts.")


class CausalSelfAttention(nn.Module):
    """Multi-head causal attention; ``probs`` is an identity whose output is the pattern."""

    def __init__(self, d_model: int, n_head: int, max_len: int) -> None:
        super().__init__()
        self.n_head = n_head
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.probs = nn.Softmax(dim=-1)
        self.proj = nn.Linear(d_model, d_model)
        mask = torch.tril(torch.ones(max_len, max_len, dtype=torch.bool))
        self.register_buffer("mask", mask, persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(x).split(d, dim=-1)
        shape = (b, t, self.n_head, d // self.n_head)
        q, k, v = (z.view(shape).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(d // self.n_head)
        att = att.masked_fill(~self.mask[:t, :t], float("-inf"))  # type: ignore[index]  # buffers read back as Tensor | Module in the stubs
        y = self.probs(att) @ v
        return self.proj(y.transpose(1, 2).reshape(b, t, d))


class Block(nn.Module):
    def __init__(self, d_model: int, n_head: int, max_len: int) -> None:
        super().__init__()
        self.ln1 = nn.LayerNorm(d_model)
        self.attn = CausalSelfAttention(d_model, n_head, max_len)
        self.ln2 = nn.LayerNorm(d_model)
        self.mlp = nn.Sequential(nn.Linear(d_model, 4 * d_model), nn.GELU(),
                                 nn.Linear(4 * d_model, d_model))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class TinyLM(nn.Module):
    """Input: token ids ``(batch, seq)``, ``seq <= max_len``; output: next-token logits
    ``(batch, seq, vocab)``."""

    def __init__(self, vocab: int = len(ALPHABET), d_model: int = 64, n_head: int = 4,
                 n_layer: int = 2, max_len: int = 64) -> None:
        super().__init__()
        self.max_len = max_len
        self.embed = nn.Embedding(vocab, d_model)
        self.pos = nn.Embedding(max_len, d_model)
        self.blocks = nn.ModuleList(Block(d_model, n_head, max_len) for _ in range(n_layer))
        self.ln_f = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        t = ids.shape[1]
        if t > self.max_len:
            raise ValueError(f"at most {self.max_len} characters; got {t}")
        x = self.embed(ids) + self.pos(torch.arange(t, device=ids.device))
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln_f(x))


def _resource(name: str) -> Any:
    return files("hookscope.resources").joinpath(name)


def lm_sample() -> dict[str, Any]:
    """The shipped prompts: ``{"prompt": ..., "other": ..., "task": ...}``."""
    return json.loads(_resource(LM_SAMPLE).read_text(encoding="utf-8"))


def lm_demo() -> tuple[nn.Module, torch.Tensor]:
    """Trained :class:`TinyLM` (eval mode) and its sample prompt as ids, shape (1, n)."""
    model = TinyLM()
    model.load_state_dict(load(_resource(LM_WEIGHTS).read_bytes()))
    model.eval()
    return model, torch.tensor([CODEC.encode(lm_sample()["prompt"])], dtype=torch.long)


def demo_meaning(name: str) -> OutputMeaning:
    """What the outputs of demo ``name`` mean."""
    if name == "lm":
        return OutputMeaning(kind=TOKENS, codec=CODEC)
    if name == "detector":
        return detector_meaning()
    if name == "cnn":
        return OutputMeaning(kind=CLASSES, labels=[str(d) for d in range(10)])
    return OutputMeaning()
