"""A small picture of a comparison's output without and with the plan, as PNG bytes.

For a notebook (:mod:`.result_html`): no Qt and no matplotlib, only numpy and
Pillow. The values drawn are what a person reads the output by: a
classifier's scores of the first row, a language model's next-token scores at
the last position, else every output value in order. Up to :data:`MAX_BARS`
values are bars side by side (grey without, orange with); more are drawn as
a trace whose every pixel column spans its values' range, so the picture's size and cost stay bounded
whatever the output's size.
"""

from __future__ import annotations

import io
from typing import Any

import numpy as np
import torch

from ..base.meaning import CLASSES, TOKENS, score_leaf
from ..base.nested import tensor_leaves

WIDTH, HEIGHT = 360, 110
MAX_BARS = 48
MAX_VALUES = 1 << 20   # values read from one output at most (the rest are not drawn)
WITHOUT = (140, 140, 140)
WITH = (230, 120, 20)


def shown_values(output: Any, meaning: Any) -> np.ndarray:
    """The output values the picture draws (see the module docstring), as float64."""
    leaf = score_leaf(output, meaning)
    kind = getattr(meaning, "kind", None)
    if isinstance(leaf, torch.Tensor) and leaf.numel():
        if kind == TOKENS and leaf.dim() == 3:
            leaf = leaf[0, -1]
        elif kind == CLASSES and leaf.dim() == 2:
            leaf = leaf[0]
        leaves = [leaf]
    else:
        leaves = [t for _, t in tensor_leaves(output)]
    parts, n = [], 0
    for t in leaves:
        flat = t.detach().reshape(-1)[:MAX_VALUES - n]
        if not flat.is_floating_point() and not flat.is_complex():
            flat = flat.double()
        parts.append(flat.real.double().cpu().numpy() if flat.is_complex() else
                     flat.double().cpu().numpy())
        n += flat.numel()
        if n >= MAX_VALUES:
            break
    return np.concatenate(parts) if parts else np.zeros(0)


def _scale(lo: float, hi: float):
    pad = (hi - lo) * 0.05 or 1.0
    lo, hi = lo - pad, hi + pad
    return lambda v: (HEIGHT - 1) - (np.asarray(v) - lo) / (hi - lo) * (HEIGHT - 1)


def _trace(draw: Any, values: np.ndarray, y: Any, colour: tuple[int, int, int]) -> None:
    """``values`` across the picture: each pixel column spans the range of its values and
    the last value of the column before, so the trace is continuous at any length."""
    edges = np.linspace(0, values.size, WIDTH + 1).astype(int)
    for x in range(WIDTH):
        lo, hi = max(0, edges[x] - 1), max(edges[x + 1], edges[x] + 1)
        seg = values[lo:hi]
        if seg.size and not np.isnan(seg).all():
            draw.line([(x, float(y(np.nanmax(seg)))), (x, float(y(np.nanmin(seg))))], fill=colour)


def comparison_png(without: Any, with_: Any, meaning: Any = None) -> bytes | None:
    """PNG bytes of the two outputs (see the module docstring); ``None`` when neither has a
    finite value to draw."""
    from PIL import Image, ImageDraw  # lazy: Pillow takes ~20 ms to import

    a, b = shown_values(without, meaning), shown_values(with_, meaning)
    finite = np.concatenate([a[np.isfinite(a)], b[np.isfinite(b)]])
    if not finite.size:
        return None
    y = _scale(float(finite.min()), float(finite.max()))
    img = Image.new("RGB", (WIDTH, HEIGHT), "white")
    draw = ImageDraw.Draw(img)
    zero = float(np.clip(y(0.0), 0, HEIGHT - 1))
    draw.line([(0, zero), (WIDTH, zero)], fill=(215, 215, 215))
    n = max(a.size, b.size)
    if n <= MAX_BARS:
        step = WIDTH / n
        bar = max(1.0, step * 0.4)
        for values, colour, shift in ((a, WITHOUT, 0.1), (b, WITH, 0.5)):
            for i, v in enumerate(values):
                if np.isfinite(v):
                    x0 = i * step + shift * step
                    top, bottom = sorted((float(y(v)), zero))
                    draw.rectangle([x0, top, x0 + bar, max(bottom, top + 1)], fill=colour)
    else:
        for values, colour in ((a, WITHOUT), (b, WITH)):
            _trace(draw, np.where(np.isfinite(values), values, np.nan), y, colour)
    buf = io.BytesIO()
    img.save(buf, "PNG")
    return buf.getvalue()
