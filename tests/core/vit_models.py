"""A ViT written in plain torch (patch embedding, one attention block with qkv and proj), for
head and position targets; its file is also a factory spec (``vit_models.py:make``) that an
exported script imports with torch alone."""

import torch
from torch import nn


class Attention(nn.Module):
    """Multi-head self-attention as a ViT writes it: qkv, per-head softmax, proj."""

    def __init__(self, d, heads):
        super().__init__()
        self.num_heads = heads
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)

    def forward(self, x):
        b, t, d = x.shape
        h = self.num_heads
        q, k, v = (z.view(b, t, h, d // h).transpose(1, 2) for z in self.qkv(x).split(d, -1))
        y = torch.softmax(q @ k.transpose(-1, -2) / (d // h) ** 0.5, -1) @ v
        return self.proj(y.transpose(1, 2).reshape(b, t, d))


class TinyViT(nn.Module):
    """Patch embedding + one attention block written in plain torch (a ViT's shape)."""

    def __init__(self, d=16, heads=4):
        super().__init__()
        self.embed = nn.Conv2d(3, d, 4, 4)
        self.attn = Attention(d, heads)
        self.head = nn.Linear(d, 3)

    def forward(self, img):
        x = self.embed(img).flatten(2).transpose(1, 2)  # (B, tokens, d)
        x = x + self.attn(x)
        return self.head(x.mean(1))


def make():
    torch.manual_seed(0)
    return TinyViT().eval(), torch.randn(2, 3, 16, 16)
