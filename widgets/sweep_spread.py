"""A sweep curve's spread over an input set: a band of mean ± spread (its edges faint
curves), a bar at each point, and the largest mean starred."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg

SPREAD_BAND = (31, 119, 180, 55)   # the fill of mean ± spread over an input set


class SpreadMarks:
    """The items drawing one curve's spread on a plot, and :attr:`best`, the point of the
    largest mean (``None`` while nothing is drawn)."""

    def __init__(self, plot: pg.PlotItem) -> None:
        edge = pg.mkPen(*SPREAD_BAND[:3], 90, width=1)
        self.band_low = pg.PlotCurveItem(pen=edge)
        self.band_high = pg.PlotCurveItem(pen=edge)
        self.band = pg.FillBetweenItem(self.band_low, self.band_high,
                                       brush=pg.mkBrush(*SPREAD_BAND))
        self.band.setZValue(-5)
        self.bars = pg.ErrorBarItem(pen=pg.mkPen((31, 119, 180, 140), width=1), beam=0.0)
        self.best_mark = pg.ScatterPlotItem(size=17, symbol="star", pen=None,
                                            brush=(214, 39, 40))
        self.best_mark.setZValue(21)
        for item in self._items():
            plot.addItem(item)
        self.best: int | None = None

    def _items(self) -> tuple:
        return self.band_low, self.band_high, self.band, self.bars, self.best_mark

    def hide(self) -> None:
        for item in self._items():
            item.setVisible(False)
        self.best = None

    def draw(self, x: np.ndarray, y: np.ndarray, spread: np.ndarray | None) -> None:
        """Mean ``y`` ± ``spread`` at ``x``; hidden where there is no spread (one input) or
        no finite mean yet."""
        finite = np.isfinite(y)
        if spread is None or not finite.any():
            self.hide()
            return
        sd = np.nan_to_num(spread.astype(np.float64))
        self.bars.setData(x=x, y=np.nan_to_num(y), height=2 * sd)
        self.band_low.setData(x[finite], (y - sd)[finite])
        self.band_high.setData(x[finite], (y + sd)[finite])
        self.best = int(np.nanargmax(y))
        self.best_mark.setData([x[self.best]], [y[self.best]])
        for item in self._items():
            item.setVisible(True)
