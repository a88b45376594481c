"""What the cursor points at in a layer's view, and the view's data as table rows.

Pure numpy (no Qt): :func:`image_cell` turns a position in a drawn image
(heat map, token map, feature-map grid, possibly before | after side by side)
into the activation's index and value; :func:`tensor_rows` lists a captured
tensor as CSV rows (index columns, then the value after and before the
intervention, or model A's and model B's).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import torch

from hookscope.core.views import MAX_CHANNELS, as_float_array

#: Above this many values a CSV export lists the drawn (pooled) picture instead.
MAX_CSV_VALUES = 1_000_000


@dataclass
class DrawnImage:
    """What :meth:`LayerPlot._draw_image` drew, kept for readouts.

    ``image`` rows × columns as drawn (NaN gaps), ``scale`` (sy, sx) activation
    units per drawn pixel, ``half`` the drawn width of the before half and
    ``gap`` the drawn gap after it (``half`` 0: one picture), ``shape`` the
    captured tensor's shape, ``kind`` its view kind (or ``top_k`` / ``position_norm``
    for those views). A zoomed view draws only part of the map: ``origin`` is
    where the image starts (view y, x), ``index0`` the map row and column of its
    first pixel and ``side`` the copy it shows ("before · " or "after · ").
    ``row_labels`` are token strings, ``col_units`` the unit index of each
    column (top-k), ``what`` names the columns.
    """

    image: np.ndarray
    scale: tuple[float, float]
    half: int
    gap: int
    shape: tuple[int, ...]
    kind: str
    origin: tuple[float, float] = (0.0, 0.0)
    index0: tuple[int, int] = (0, 0)
    side: str = ""
    row_labels: list[str] | None = None
    col_units: list[int] | None = field(default=None)


def _grid(channels: int) -> tuple[int, int]:
    """(rows, columns) of tiles of :func:`~hookscope.core.views.feature_grid`."""
    c = min(channels, MAX_CHANNELS)
    cols = max(1, math.ceil(math.sqrt(c)))
    return math.ceil(c / cols), cols


def image_cell(d: DrawnImage, x: float, y: float) -> str | None:
    """The readout for view point ``(x, y)`` (activation units), or ``None``
    off the picture or on a gap."""
    sy, sx = d.scale
    x, y = x - d.origin[1], y - d.origin[0]
    col, row = int(math.floor(x / sx)), int(math.floor(y / sy))
    h, w = d.image.shape
    if not (0 <= row < h and 0 <= col < w):
        return None
    value = float(d.image[row, col])
    if math.isnan(value):
        return None
    side = d.side
    if d.half:
        if col < d.half:
            side = "before · "
        elif col >= d.half + d.gap:
            side, col = "after · ", col - d.half - d.gap
        else:
            return None
    pooled = sx > 1.0001 or sy > 1.0001
    v = f"{'≈' if pooled else ''}{value:.4g}"
    if d.kind == "feature_maps":
        grid_rows, grid_cols = _grid(d.shape[1])
        tile_h = (h + 1) // grid_rows - 1
        tile_w = ((d.half or w) + 1) // grid_cols - 1
        gy, ty = divmod(row, tile_h + 1)
        gx, tx = divmod(col, tile_w + 1)
        channel = gy * grid_cols + gx
        if ty >= tile_h or tx >= tile_w or channel >= min(d.shape[1], MAX_CHANNELS):
            return None
        fy, fx = d.shape[2] / tile_h, d.shape[3] / tile_w
        approx = "≈" if fy > 1.0001 or fx > 1.0001 else ""
        return (f"{side}channel {channel}, y {approx}{int(ty * fy)}, x {approx}{int(tx * fx)}: "
                f"{'≈' if approx else ''}{value:.4g}")
    r, c = d.index0[0] + int(row * sy), d.index0[1] + int(col * sx)
    if d.kind == "position_norm":
        return f"{side}y {r}, x {c}: norm {v}"
    tokens = len(d.shape) == 3
    names = ("token", "feature") if tokens else ("row", "unit")
    if d.kind == "top_k" and len(d.shape) == 4:
        names = ("position", "channel")
    row_name = f"{names[0]} {r}"
    if d.row_labels is not None and 0 <= r < len(d.row_labels) and sy <= 1.0001:
        row_name += f" {d.row_labels[r]!r}"
    if d.col_units is not None and 0 <= c < len(d.col_units):
        return f"{side}{row_name}, {names[1]} {d.col_units[c]} (top-k #{c + 1}): {v}"
    return f"{side}{row_name}, {names[1]} {c}: {v}"


def bar_cell(x: float, after: np.ndarray, before: np.ndarray | None,
             labels: list[str] | None = None, names: tuple[str, str] = ("after", "before"),
             what: str = "unit") -> str | None:
    """The readout for the bar nearest ``x``: its index (and label) and value(s)."""
    i = int(round(x))
    if not 0 <= i < after.size or abs(x - i) > 0.45:
        return None
    label = f" ({labels[i]})" if labels and i < len(labels) and labels[i] else ""
    if before is None or i >= before.size:
        return f"{what} {i}{label}: {after[i]:.4g}"
    return f"{what} {i}{label}: {names[0]} {after[i]:.4g} · {names[1]} {before[i]:.4g}"


def _first_sample(t: torch.Tensor, kind: str) -> np.ndarray:
    x = as_float_array(t)
    if kind in ("feature_maps", "tokens") and x.dim() >= 3:
        return x[0].numpy()
    return x.reshape(-1).numpy() if x.dim() <= 1 or (x.dim() == 2 and x.shape[0] == 1) else \
        x.reshape(-1, x.shape[-1]).numpy()


def tensor_rows(tensor: torch.Tensor | None, pre: torch.Tensor | None, kind: str,
                drawn: np.ndarray | None = None, pre_name: str = "before",
                pair: bool = False) -> tuple[list[str], list[list]]:
    """A captured tensor as CSV rows: index columns, ``value`` and (if it is
    compared with one) ``pre_name``: ``before`` its intervention, or ``without``
    the interventions for a layer downstream. ``pair``: ``pre`` is model A's output and
    ``tensor`` model B's, written as columns ``A`` then ``B``. Feature maps and token maps
    list the first sample; a tensor of more than :data:`MAX_CSV_VALUES` values lists the
    drawn picture instead."""
    if tensor is None:
        return ["note"], [["statistics only: no tensor was kept"]]
    arr = _first_sample(tensor, kind)
    if arr.size > MAX_CSV_VALUES and drawn is not None:
        idx = np.indices(drawn.shape).reshape(2, -1).T
        return (["picture_row", "picture_column", "value (block mean)"],
                [[*map(int, i), float(v)] for i, v in zip(idx, drawn.reshape(-1))])
    names = {"feature_maps": ["channel", "y", "x"], "tokens": ["token", "feature"]}.get(
        kind, ["row", "unit"] if arr.ndim == 2 else ["unit"])
    before = _first_sample(pre, kind) if pre is not None else None
    idx = np.indices(arr.shape).reshape(arr.ndim, -1).T
    flat = arr.reshape(-1)
    if before is not None and before.shape == arr.shape:
        pre_flat = before.reshape(-1)
        if pair:
            return ([*names, "A", "B"],
                    [[*map(int, i), float(p), float(v)] for i, v, p in zip(idx, flat, pre_flat)])
        return ([*names, "value", pre_name],
                [[*map(int, i), float(v), float(p)] for i, v, p in zip(idx, flat, pre_flat)])
    return ([*names, "B" if pair else "value"],
            [[*map(int, i), float(v)] for i, v in zip(idx, flat)])
