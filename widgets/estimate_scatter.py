"""An estimated sweep's check: each verified cell's first-order estimate (x) against the
value its real run gave (y), the line where the two agree, and their Spearman ρ in the title.

Its items are made once and refilled with ``setData``; it hides itself while there are no
verified cells to show.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QVBoxLayout, QWidget

from hookscope.widgets.named import named
from hookscope.widgets.plot_style import plain_axes


def rho_text(verified: dict[str, Any] | None) -> str:
    """``ρ = 0.930 over 8 cells`` (``ρ undefined`` where it cannot be computed: fewer than
    two cells, or every estimate or value alike)."""
    if not verified:
        return ""
    n = len(verified.get("cells") or [])
    r = verified.get("spearman")
    shown = f"ρ = {r:.3f}" if isinstance(r, (int, float)) and math.isfinite(r) else "ρ undefined"
    return f"{shown} over {n} cell{'s' if n != 1 else ''}"


class EstimateScatter(QWidget):
    """Estimate against actual for the verified cells of one sweep (object name
    ``sweepScatter``)."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.graphics = named(pg.GraphicsLayoutWidget(self), "sweepScatterPlot")
        self.graphics.setBackground("w")
        self.graphics.setMinimumSize(140, 120)
        self.plot = plain_axes(self.graphics.addPlot(row=0, col=0))
        self.plot.setMenuEnabled(False)
        self.plot.hideButtons()
        self.plot.setLabel("bottom", "estimate")
        self.plot.setLabel("left", "run")
        self.diagonal = pg.PlotDataItem(pen=pg.mkPen((150, 150, 150), width=1,
                                                     style=Qt.PenStyle.DashLine))
        self.plot.addItem(self.diagonal)
        self.points = pg.ScatterPlotItem(size=8, pen=pg.mkPen((20, 20, 20), width=1),
                                         brush=pg.mkBrush(31, 119, 180, 200))
        self.plot.addItem(self.points)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addWidget(self.graphics)
        self.setObjectName("sweepScatter")
        self.setVisible(False)

    def show_verified(self, verified: dict[str, Any] | None, metric: str = "") -> None:
        """Plot the verified cells (``None`` or none verified: hidden); ``metric`` names the
        axes' numbers."""
        pairs = [(e, v) for e, v in zip((verified or {}).get("estimates") or [],
                                        (verified or {}).get("values") or [])
                 if e is not None and v is not None]
        if not pairs:
            self.points.setData([], [])
            self.diagonal.setData([], [])
            self.setVisible(False)
            return
        x = np.array([p[0] for p in pairs], dtype=float)
        y = np.array([p[1] for p in pairs], dtype=float)
        self.points.setData(x, y)
        self.setToolTip(f"{metric or 'the metric'} of each verified cell: its first-order "
                        "estimate (x) against its real run (y); on the dashed line they agree")
        lo, hi = float(min(x.min(), y.min())), float(max(x.max(), y.max()))
        self.diagonal.setData([lo, hi], [lo, hi])
        self.plot.setTitle(rho_text(verified), size="9pt")
        self.plot.autoRange(padding=0.08)
        self.setVisible(True)
