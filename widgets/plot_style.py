"""Small shared settings for every pyqtgraph plot of the app."""

from __future__ import annotations

import math

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt


def plain_axes(plot: pg.PlotItem) -> pg.PlotItem:
    """Show axis values as they are.

    pyqtgraph rescales small ranges with an SI prefix ("output value (x0.001)"
    with ticks at -200); a learner comparing with torch's printed -0.2042 should
    read -0.2 on the axis.
    """
    # All four: a hidden top or right axis still follows the view's range, and with
    # its prefix on it re-typesets its (empty) label on every range change.
    for side in ("left", "bottom", "top", "right"):
        axis = plot.getAxis(side)
        axis.enableAutoSIPrefix(False)
        # pyqtgraph 0.14 still rescales in updateAutoSIPrefix() whenever the label is
        # visible, ignoring the flag above; no enabled range means no rescaling at all.
        axis.setSIPrefixEnableRanges(())
        axis.updateAutoSIPrefix()
    return plot


def set_ticks(axis: pg.AxisItem, ticks: list | None) -> None:
    """``axis.setTicks(ticks)``, only when they differ from the ticks it has.

    pyqtgraph throws an axis' drawn picture away on every ``setTicks`` (and
    ``setLabel``), equal or not, and builds it again at the next paint: 1-2 ms
    an axis. A Live drag redraws the same labels many times a second.
    """
    if axis._tickLevels != ticks:
        axis.setTicks(ticks)


def set_label(plot: pg.PlotItem, side: str, text: str | None) -> None:
    """``plot.setLabel(side, text)``, only when the axis does not already show
    that label (see :func:`set_ticks` for why)."""
    axis = plot.getAxis(side)
    if axis.labelText != (text or "") or axis.label.isVisible() != bool(text) \
            or not axis.isVisible():
        plot.setLabel(side, text)


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


class IndexAxis(pg.AxisItem):
    """An axis that counts things (units, tokens, output indices).

    With ``integer`` on, ticks sit on whole numbers only: a learner should
    never read "unit 0.5". With :meth:`set_halves`, the axis spans two pictures
    side by side (before | after) and its labels restart at 0 for the second.
    """

    def __init__(self, orientation: str, **kwargs) -> None:
        super().__init__(orientation, **kwargs)
        if orientation in ("bottom", "top"):
            # Index 0 sits on the axis' left end: let its label overhang a little
            # rather than vanish (pyqtgraph hides any label that overhangs).
            self.setStyle(hideOverlappingLabels=10)
        self.integer = False
        self._halves: tuple[float, float] | None = None   # (length of each half, start of the 2nd)

    def set_integer(self, on: bool) -> None:
        if on != self.integer:
            self.integer = on
            self.picture = None
            self.update()

    def set_halves(self, halves: tuple[float, float] | None) -> None:
        """``(n, offset)``: the axis shows ``[0, n)`` twice, the second copy
        starting at ``offset``; ``None`` for one plain picture."""
        if halves != self._halves:
            self._halves = halves
            self.picture = None
            self.update()

    def halves(self) -> tuple[float, float] | None:
        return self._halves

    def tickSpacing(self, minVal: float, maxVal: float, size: float):  # noqa: N802, N803
        levels = super().tickSpacing(minVal, maxVal, size)
        if not self.integer or self._tickSpacing is not None:
            return levels
        dif = abs(maxVal - minVal)
        digits = len(str(int(max(abs(minVal), abs(maxVal)))))
        if dif > 0 and size / dif >= 5 * digits + 9:
            return [(1.0, 0.0)]  # room for every index: label each one (0 1 2 ... 9)
        # Fractional spacings (0.5, 0.2, ...) would label between two units.
        whole = [(s, o) for s, o in levels if s >= 1 - 1e-9]
        return whole or [(1.0, 0.0)]

    def tickValues(self, minVal: float, maxVal: float, size: float):  # noqa: N802, N803
        if self._halves is None or self._tickSpacing is not None:
            return super().tickValues(minVal, maxVal, size)
        n, offset = self._halves
        lo, hi = sorted((minVal, maxVal))
        # Spacing as for one half drawn in its share of the pixels.
        span = max(hi - lo, 1e-9)
        levels = self.tickSpacing(0.0, n, max(size * n / span, 1.0))
        if not levels:
            return []
        spacing = levels[0][0]
        base = np.arange(0.0, n - 1e-9, spacing)
        # A first-half tick too close to the second half's 0 would read "300".
        per_unit = size / span
        first = base[(offset - base) * per_unit >= 24]
        values = np.concatenate([first, base + offset])
        values = values[(values >= lo - 1e-9) & (values <= hi + 1e-9)]
        return [(spacing, values.tolist())]

    def tickStrings(self, values, scale, spacing):  # noqa: N802
        if self._halves is None and not self.integer:
            return super().tickStrings(values, scale, spacing)
        offset = self._halves[1] if self._halves is not None else math.inf
        out = []
        for v in values:
            v = v - offset if v >= offset - 1e-9 else v
            out.append(f"{v:.0f}" if spacing >= 1 - 1e-9 else f"{v:g}")
        return out


def index_axes(*orientations: str) -> dict[str, IndexAxis]:
    """``axisItems=`` for a PlotWidget / addPlot whose ``orientations`` count things."""
    return {o: IndexAxis(o) for o in orientations}


def title_never_widens(plot: pg.PlotItem) -> pg.PlotItem:
    """Let ``plot``'s title be narrower than its text.

    pyqtgraph makes a title's text width the plot's minimum width (again on
    every resize), and a plot wider than its widget is cut off at the right
    edge: bars and axis go missing. Here the title keeps its height and the
    centred text may overhang instead.
    """
    label = plot.titleLabel
    keep_height = type(label).updateMin

    def update_min() -> None:
        keep_height(label)
        label.setMinimumWidth(0)
        hints = dict(label._sizeHint)
        for hint in (Qt.SizeHint.MinimumSize, Qt.SizeHint.PreferredSize):
            hints[hint] = (0, hints[hint][1])
        label._sizeHint = hints
        label.updateGeometry()

    label.updateMin = update_min
    update_min()
    return plot
