"""Small shared settings for every pyqtgraph plot of the app."""

from __future__ import annotations

import pyqtgraph as pg


def plain_axes(plot: pg.PlotItem) -> pg.PlotItem:
    """Show axis values as they are.

    pyqtgraph rescales small ranges with an SI prefix ("output value (x0.001)"
    with ticks at -200); a learner comparing with torch's printed -0.2042 should
    read -0.2 on the axis.
    """
    for side in ("left", "bottom"):
        plot.getAxis(side).enableAutoSIPrefix(False)
    return plot
