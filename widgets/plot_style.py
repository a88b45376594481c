"""Small shared settings for every pyqtgraph plot of the app."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg


def plain_axes(plot: pg.PlotItem) -> pg.PlotItem:
    """Show axis values as they are.

    pyqtgraph rescales small ranges with an SI prefix ("output value (x0.001)"
    with ticks at -200); a learner comparing with torch's printed -0.2042 should
    read -0.2 on the axis.
    """
    for side in ("left", "bottom"):
        axis = plot.getAxis(side)
        axis.enableAutoSIPrefix(False)
        # pyqtgraph 0.14 still rescales in updateAutoSIPrefix() whenever the label is
        # visible, ignoring the flag above; no enabled range means no rescaling at all.
        axis.setSIPrefixEnableRanges(())
        axis.updateAutoSIPrefix()
    return plot


#: A line plot is reduced to about this many points before drawing.
MAX_LINE_POINTS = 4096


def peak_envelope(y: np.ndarray, max_points: int = MAX_LINE_POINTS) -> tuple[np.ndarray, np.ndarray]:
    """``(x, y)`` to draw ``y`` against its index with at most ~``max_points`` points.

    Longer series are cut into buckets and each bucket drawn as its minimum
    and maximum, so every spike stays visible while Qt strokes a few thousand
    segments instead of half a million (which took it seconds on the GUI thread).
    """
    n = y.size
    if n <= max_points:
        return np.arange(n, dtype=float), y
    size = -(-n // (max_points // 2))
    buckets = -(-n // size)  # the last bucket may be short: padded with its last value
    pad = buckets * size - n
    yp = np.concatenate([y, np.full(pad, y[-1])]) if pad else y
    blocks = yp.reshape(buckets, size)
    x = np.repeat(np.minimum(np.arange(buckets) * size + size / 2.0, n - 1), 2)
    env = np.empty(2 * buckets)
    env[0::2] = blocks.min(axis=1)
    env[1::2] = blocks.max(axis=1)
    return x, env
