"""Which part of a heat map a zoomed view shows, so that it is pooled again at
full resolution instead of magnifying the pooled picture. Pure numpy, no Qt.

A map is ``rows × cols`` activation units (a token × feature map, a top-k
map ...); drawn before | after, the two copies sit side by side on one x axis,
the second starting at ``offset`` (see ``LayerPlot._configure_view``). A view
range in those units becomes a :class:`Window`: the rows and columns to pool
and which copy they belong to.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from .views_by_shape import reduce_2d


@dataclass(frozen=True)
class Window:
    """Rows ``[r0, r1)`` and columns ``[c0, c1)`` of the map; ``side`` is
    ``""`` (one picture), ``"before"`` or ``"after"`` (one copy of a before |
    after pair), or ``"both"`` (both copies, every column, rows cropped)."""

    side: str
    r0: int
    r1: int
    c0: int
    c1: int


def _span(a: float, b: float, n: int) -> tuple[int, int]:
    lo = min(max(int(math.floor(a)), 0), n)
    hi = min(max(int(math.ceil(b)), 0), n)
    return lo, hi


def visible_window(x_range: tuple[float, float], y_range: tuple[float, float], rows: int,
                   cols: int, halves: tuple[float, float] | None = None) -> Window | None:
    """The part of a ``rows × cols`` map inside the view ranges, or ``None`` when
    the whole map is in view (or none of it): the full picture is drawn then.

    ``halves`` is ``(cols, offset)`` for before | after: x in ``[0, cols)`` is
    the "before" copy, ``[offset, offset + cols)`` the "after" one.
    """
    x0, x1 = sorted(x_range)
    y0, y1 = sorted(y_range)
    r0, r1 = _span(y0, y1, rows)
    if halves is None:
        side = ""
        c0, c1 = _span(x0, x1, cols)
    else:
        n, offset = halves
        if x1 <= n:
            side, (c0, c1) = "before", _span(x0, x1, cols)
        elif x0 >= n:
            side, (c0, c1) = "after", _span(x0 - offset, x1 - offset, cols)
        else:
            side, c0, c1 = "both", 0, cols
    if r1 <= r0 or c1 <= c0:
        return None
    if (r0, r1, c0, c1) == (0, rows, 0, cols) and side in ("", "both"):
        return None
    return Window(side, r0, r1, c0, c1)


def pool_window(x: torch.Tensor, w: Window, max_rows: int, max_cols: int) -> np.ndarray:
    """The window's part of the 2-D map ``x``, block-mean pooled to at most
    ``max_rows × max_cols`` (a deep zoom is drawn cell by cell)."""
    return reduce_2d(x[w.r0:w.r1, w.c0:w.c1], max_rows, max_cols)
