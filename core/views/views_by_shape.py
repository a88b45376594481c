"""How a captured tensor is drawn, chosen by its shape (torch + numpy, no Qt: the views call it).

A layer plot shows one of five views; this module picks it and turns the
CPU tensor into the small array the view draws:

``bars``          a vector of at most :data:`MAX_BARS` units (batch 1 squeezed): one bar per unit
``heatmap``       a 2-D activation (batch × units) or a long vector folded into a square
``feature_maps``  N×C×H×W: the first sample's channels (up to :data:`MAX_CHANNELS`) as a grid
``tokens``        N×T×D: the first sample as a token × feature heat map
``none``          no tensor kept (statistics-only runs)

Every image is reduced (block-mean pooled) to at most :data:`MAX_PIXELS` on a
side, so drawing never depends on how large the activation is.
"""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F

MAX_BARS = 256
MAX_CHANNELS = 64
MAX_PIXELS = 512

VIEW_KINDS = ("bars", "heatmap", "feature_maps", "tokens", "none")


def view_kind(shape: tuple[int, ...] | None, has_tensor: bool = True) -> str:
    """The view for a tensor of ``shape`` (see the module docstring)."""
    if not has_tensor or shape is None:
        return "none"
    nd = len(shape)
    if nd == 4:
        return "feature_maps"
    if nd == 3:
        return "tokens"
    if nd <= 1:
        return "bars" if math.prod(shape) <= MAX_BARS else "heatmap"
    if nd == 2:
        return "bars" if shape[0] == 1 and shape[1] <= MAX_BARS else "heatmap"
    return "heatmap"


def as_float_array(t: torch.Tensor) -> torch.Tensor:
    """A float32 CPU copy-free view for drawing (complex → magnitude)."""
    t = t.detach()
    if t.is_complex():
        t = t.abs()
    return t.to(torch.float32) if t.dtype != torch.float32 else t


def bars_values(t: torch.Tensor) -> np.ndarray:
    """The values of a small vector, batch squeezed: one per bar."""
    return as_float_array(t).reshape(-1).numpy().copy()


def view_image(t: torch.Tensor, kind: str, max_rows: int = MAX_PIXELS,
               max_cols: int = MAX_PIXELS) -> np.ndarray:
    """The 2-D array (rows × columns, NaN = blank) drawn for ``kind``, pooled to at
    most ``max_rows × max_cols`` (a view passes its own size in pixels: drawing
    more pixels than the screen shows only costs time)."""
    x = as_float_array(t)
    max_rows, max_cols = min(max_rows, MAX_PIXELS), min(max_cols, MAX_PIXELS)
    if kind == "feature_maps":
        return feature_grid(x[0], max_side=min(max_rows, max_cols))
    if kind == "tokens":
        return reduce_2d(x[0], max_rows, max_cols)
    # heatmap
    if x.dim() <= 1 or (x.dim() == 2 and x.shape[0] == 1):
        return fold_vector(x.reshape(-1), max_rows, max_cols)
    if x.dim() > 2:
        # First sample, everything but the last axis flattened into rows.
        x = x[0].reshape(-1, x.shape[-1])
    return reduce_2d(x, max_rows, max_cols)


def full_size(shape: tuple[int, ...], kind: str) -> tuple[int, int] | None:
    """(rows, columns) of ``kind``'s picture before pooling (axes count these), or
    ``None`` where the picture has no axes (feature maps)."""
    if kind == "tokens" and len(shape) == 3:
        return shape[1], shape[2]
    if kind != "heatmap":
        return None
    n = math.prod(shape)
    if len(shape) <= 1 or (len(shape) == 2 and shape[0] == 1):
        cols = max(1, math.ceil(math.sqrt(n)))
        return math.ceil(n / cols), cols
    if len(shape) > 2:
        return math.prod(shape[1:-1]), shape[-1]
    return shape[0], shape[1]


def fold_vector(v: torch.Tensor, max_rows: int = MAX_PIXELS, max_cols: int = MAX_PIXELS) -> np.ndarray:
    """A long vector as a near-square image, row by row, padded with NaN."""
    n = v.numel()
    cols = max(1, math.ceil(math.sqrt(n)))
    rows = math.ceil(n / cols)
    if rows * cols == n:
        return reduce_2d(v.reshape(rows, cols), max_rows, max_cols)
    out = torch.full((rows * cols,), float("nan"))
    out[:n] = v
    return reduce_2d(out.reshape(rows, cols), max_rows, max_cols)


def reduce_2d(x: torch.Tensor, max_rows: int = MAX_PIXELS, max_cols: int = MAX_PIXELS) -> np.ndarray:
    """Block-mean pool a 2-D tensor down to at most ``max_rows × max_cols``."""
    r, c = x.shape
    if r > max_rows or c > max_cols:
        x = F.adaptive_avg_pool2d(x[None, None], (min(r, max_rows), min(c, max_cols)))[0, 0]
        return x.numpy()  # a fresh tensor: no copy needed
    return x.numpy().copy()


def feature_grid(maps: torch.Tensor, max_channels: int = MAX_CHANNELS,
                 max_side: int = MAX_PIXELS) -> np.ndarray:
    """C×H×W maps as one image: a near-square grid of tiles, one NaN pixel between.

    Only the first ``max_channels`` channels are drawn; each tile is pooled
    so that the whole grid stays within ``max_side`` pixels.
    """
    maps = maps[:max_channels]
    c, h, w = maps.shape
    cols = max(1, math.ceil(math.sqrt(c)))
    rows = math.ceil(c / cols)
    tile_h = min(h, max(1, max_side // rows - 1))
    tile_w = min(w, max(1, max_side // cols - 1))
    if (tile_h, tile_w) != (h, w):
        maps = F.adaptive_avg_pool2d(maps[None], (tile_h, tile_w))[0]
    # Every tile with its NaN border (right, below) in one tensor, laid out as the
    # grid by one reshape: a copy per channel took ~1 ms of each redraw of 64 maps.
    tiles = torch.full((rows * cols, tile_h + 1, tile_w + 1), float("nan"), dtype=maps.dtype)
    tiles[:c, :tile_h, :tile_w] = maps
    grid = tiles.reshape(rows, cols, tile_h + 1, tile_w + 1).permute(0, 2, 1, 3)
    grid = grid.reshape(rows * (tile_h + 1), cols * (tile_w + 1))[:-1, :-1]
    return np.ascontiguousarray(grid.numpy())


def side_by_side(left: np.ndarray, right: np.ndarray, gap: int = 2) -> np.ndarray:
    """Two images next to each other (NaN gap and padding), for before | after."""
    rows = max(left.shape[0], right.shape[0])
    gap = max(gap, 1)
    out = np.full((rows, left.shape[1] + gap + right.shape[1]), np.nan, dtype=np.float32)
    out[: left.shape[0], : left.shape[1]] = left
    out[: right.shape[0], left.shape[1] + gap:] = right
    return out


def symmetric_level(*arrays: np.ndarray | None) -> float:
    """The largest finite |value| of the arrays (at least a tiny positive number),
    used as ±level so that zero is the centre of a diverging colour map."""
    m = 0.0
    for a in arrays:
        if a is None or a.size == 0:
            continue
        finite = a[np.isfinite(a)]
        if finite.size:
            m = max(m, float(np.abs(finite).max()))
    return m if m > 0 else 1e-6
