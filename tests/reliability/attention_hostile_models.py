"""Modules that look like attention but whose pattern cannot be recovered, for the
attention refusals (imported as ``attention_hostile_models:NAME``)."""

from __future__ import annotations

import torch
from torch import nn


class RotaryWithoutPositions(nn.Module):
    """Shaped like Llama attention (q_proj, k_proj, head_dim) but called with no
    position_embeddings: its rotary positions are nowhere to be read."""

    def __init__(self) -> None:
        super().__init__()
        self.head_dim = 4
        self.q_proj, self.k_proj, self.o_proj = nn.Linear(8, 8), nn.Linear(8, 8), nn.Linear(8, 8)

    def forward(self, hidden_states, attention_mask=None):
        return self.o_proj(hidden_states)


class OpaqueMask(nn.Module):
    """Shaped like GPT-2 attention (c_attn, split_size, head_dim), called with a mask that is
    not a tensor (as flex attention's BlockMask)."""

    def __init__(self) -> None:
        super().__init__()
        self.c_attn, self.c_proj = nn.Linear(8, 24), nn.Linear(8, 8)
        self.split_size, self.head_dim = 8, 4

    def forward(self, hidden_states, attention_mask=None):
        return self.c_proj(self.c_attn(hidden_states)[..., :8])


class Holder(nn.Module):
    def __init__(self, attn: nn.Module, call: bool = True, mask=None) -> None:
        super().__init__()
        self.pre = nn.Linear(8, 8)
        self.attn = attn
        self.call, self.mask = call, mask

    def forward(self, x):
        h = self.pre(x)
        if not self.call:  # the attention is skipped on this path
            return h
        return self.attn(h, attention_mask=self.mask) if self.mask is not None else self.attn(h)


def no_positions():
    torch.manual_seed(0)
    return Holder(RotaryWithoutPositions()), torch.randn(1, 5, 8)


def opaque_mask():
    torch.manual_seed(0)
    return Holder(OpaqueMask(), mask=object()), torch.randn(1, 5, 8)


def never_runs():
    torch.manual_seed(0)
    return Holder(nn.MultiheadAttention(8, 2, batch_first=True), call=False), torch.randn(1, 5, 8)
