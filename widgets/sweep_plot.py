"""A sweep's numbers drawn: a heatmap for two axes (rows along the first, columns along the
second, row 0 at the top), a curve for one. The axes are labelled by the sweep's labels (layer
names, token strings, numbers); hovering shows the cell's coordinates and value in a read-out
line; a click on a cell asks for that cell's run (``cellChosen(row, col)``).

Cells not run yet are NaN and drawn grey, so a grid that fills in as cells arrive (or one
cut short by Cancel) reads as such. Numbers of both signs get a diverging map centred on
zero (blue below, red above); numbers of one sign a sequential one.

Over an input set the numbers are means: a curve draws a band and a bar of mean ± spread
and stars the largest mean, the read-out gives a cell's spread, and the Show list draws a
grid's row (one layer over strengths) as such a curve. A heat map over an input set, or
with a numeric axis, marks each row's largest number with a small star (see
:mod:`.sweep_best`), and the read-out of that cell says so.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QPointF, QRectF, Qt, Signal
from PySide6.QtGui import QBrush, QColor, QPainterPath, QPen
from PySide6.QtWidgets import (QComboBox, QGraphicsPathItem, QGraphicsRectItem, QHBoxLayout,
                               QLabel, QVBoxLayout, QWidget)

from hookscope.core.analyses import SweepResult
from hookscope.widgets.named import named
from hookscope.widgets.plot_style import plain_axes
from hookscope.widgets.sweep_best import marks_row_bests, row_bests
from hookscope.widgets.sweep_spread import SpreadMarks
from hookscope.widgets.sweep_labels import LabelAxis, column_labels, labels_of, numeric

DIVERGING = "CET-D1"   # blue-white-red, white at zero
SEQUENTIAL = "viridis"
NOT_RUN = QColor(225, 225, 225)
ESTIMATED = "estimates — first order"   # the title's mark of a grid of estimates
MEAN_OF = "means over"   # the mark above a grid over an input set
HEAT_MAP = "heat map"   # the Show list's first entry; the others draw one row as a curve
ROW_BEST_PX = 10   # the star marking a heat map row's largest number, in pixels
ROW_BEST_IN = 9    # its middle this many pixels in from the cell's top and right edges


class SweepPlot(QWidget):
    """The heatmap or curve of one :class:`SweepResult` and a read-out line under it."""

    cellChosen = Signal(int, int)   # row, column (0 for one axis)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.result: SweepResult | None = None
        # metric as run -> as the person chose it (a picked token is run as its id, #18,
        # and named by its text, 'm', in the title, the axis and the read-out)
        self.metric_names: dict[str, str] = {}
        self.bottom = LabelAxis("bottom")
        self.left = LabelAxis("left")
        self.graphics = named(pg.GraphicsLayoutWidget(self), "sweepPlot")
        self.graphics.setBackground("w")
        self.graphics.setMinimumHeight(160)
        self.plot = plain_axes(self.graphics.addPlot(row=0, col=0, axisItems={
            "bottom": self.bottom, "left": self.left}))
        self.plot.setMenuEnabled(False)
        self.plot.hideButtons()
        self.backdrop = QGraphicsRectItem()
        self.backdrop.setBrush(QBrush(NOT_RUN))
        self.backdrop.setPen(QPen(Qt.PenStyle.NoPen))
        self.backdrop.setZValue(-10)
        self.plot.addItem(self.backdrop)
        self.image = pg.ImageItem(axisOrder="row-major")
        self.plot.addItem(self.image)
        self.curve = pg.PlotDataItem(pen=pg.mkPen((31, 119, 180), width=2), symbol="o",
                                     symbolSize=7, symbolBrush=(31, 119, 180),
                                     symbolPen=None, connect="finite")
        self.plot.addItem(self.curve)
        self.baseline_line = pg.InfiniteLine(angle=0, movable=False, pen=pg.mkPen(
            (120, 120, 120), width=1, style=Qt.PenStyle.DashLine), label="baseline",
            labelOpts={"position": 0.05, "color": (90, 90, 90), "anchors": [(0, 1), (0, 1)]})
        self.plot.addItem(self.baseline_line)
        self.marker = QGraphicsRectItem()
        self.marker.setPen(pg.mkPen((0, 0, 0), width=2, cosmetic=True))
        self.marker.setZValue(20)
        self.plot.addItem(self.marker)
        self.hover_mark = QGraphicsRectItem()
        self.hover_mark.setPen(pg.mkPen((255, 140, 0), width=2, cosmetic=True))
        self.hover_mark.setZValue(19)
        self.plot.addItem(self.hover_mark)
        self.point_mark = pg.ScatterPlotItem(size=13, pen=pg.mkPen((0, 0, 0), width=2),
                                             brush=None)
        self.plot.addItem(self.point_mark)
        # a mean over an input set: its spread, and the largest mean starred
        self.spread = SpreadMarks(self.plot)
        # an estimated sweep: the cells also run for real outlined (a grid), or their real
        # values as points beside the curve of estimates
        self.verified_mark = QGraphicsPathItem()
        self.verified_mark.setPen(pg.mkPen((20, 20, 20), width=1.5, cosmetic=True,
                                           style=Qt.PenStyle.DashLine))
        self.verified_mark.setZValue(18)
        self.plot.addItem(self.verified_mark)
        self.verified_points = pg.ScatterPlotItem(size=9, symbol="s", pen=pg.mkPen((20, 20, 20)),
                                                  brush=(255, 160, 0))
        self.verified_points.setZValue(18)
        self.plot.addItem(self.verified_points)
        # a heat map's best cell of each row: a small white star, outlined to read on any
        # colour, set in the cell's top-right corner (the cell's colour stays whole at its
        # middle), under the cell marks
        self.row_best_mark = pg.ScatterPlotItem(size=ROW_BEST_PX, symbol="star",
                                                pen=pg.mkPen((30, 30, 30), width=1),
                                                brush=(255, 255, 255))
        self.row_best_mark.setZValue(17)
        self.plot.addItem(self.row_best_mark, ignoreBounds=True)
        #: ``{row: column}`` of the cells marked as their row's largest (a heat map)
        self.row_best: dict[int, int] = {}
        # placed in pixels from the corner: again when a resize or zoom changes a cell's size
        self.plot.vb.sigTransformChanged.connect(lambda *_a: self._place_row_bests())
        self.colour_bar = pg.ColorBarItem(values=(0.0, 1.0), colorMap=pg.colormap.get(SEQUENTIAL),
                                          interactive=False, width=12, colorMapMenu=False)
        self.colour_bar.axis.enableAutoSIPrefix(False)
        self.colour_bar.axis.setSIPrefixEnableRanges(())
        self.graphics.addItem(self.colour_bar, row=0, col=1)
        # an estimated sweep, or one over an input set, says so above its grid, in words that
        # wrap in a narrow dock (the title would set the plot's least width)
        self.estimated = named(QLabel(""), "sweepEstimated")
        self.estimated.setWordWrap(True)
        self.estimated.setStyleSheet("color: #8a5a00;")
        self.estimated.setVisible(False)
        # a grid drawn whole (a heat map) or one of its rows as a curve along the columns
        # (one layer's dose-response over strengths, with its spread over an input set)
        self.show_box = named(QComboBox(), "sweepShow")
        self.show_box.addItem(HEAT_MAP)
        self.show_box.setToolTip("Draw the grid as a heat map, or one row (one value of the "
                                 "first axis) as a curve along the second axis")
        self.show_box.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToContents)
        self.show_row = QWidget()
        show_lay = QHBoxLayout(self.show_row)
        show_lay.setContentsMargins(0, 0, 0, 0)
        show_lay.addWidget(QLabel("Show"))
        show_lay.addWidget(self.show_box)
        self.show_row.setVisible(False)
        self.show_box.currentIndexChanged.connect(self._on_show)
        self.readout = named(QLabel(" "), "sweepReadout")
        self.readout.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.readout.setWordWrap(True)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        # one line above the plot (its height is the plot's scarcest room): the estimate's
        # mark, and the Show list at the right
        top = QHBoxLayout()
        top.addWidget(self.estimated, 1)
        top.addWidget(self.show_row, 0, Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignTop)
        lay.addLayout(top)
        lay.addWidget(self.graphics, 1)
        lay.addWidget(self.readout)
        self.chosen: tuple[int, int] | None = None
        # what was drawn (shape, row): a new one resets the zoom and the marked cell
        self._shape: tuple[tuple[int, ...], int | None] | None = None
        self.graphics.scene().sigMouseMoved.connect(self._on_move)
        self.graphics.scene().sigMouseClicked.connect(self._on_click)
        self.show_result(None)

    # -- drawing -------------------------------------------------------------------
    def metric_name(self, result: SweepResult) -> str:
        return self.metric_names.get(result.metric, result.metric)

    def show_result(self, result: SweepResult | None) -> None:
        """Draw ``result`` (``None``: empty). A grid of the same shape keeps the view's zoom
        (cells arriving one by one must not reset it), and the row the Show list draws."""
        self.result = result
        if result is None:
            for item in (self.image, self.curve, self.baseline_line, self.backdrop,
                         self.marker, self.hover_mark, self.point_mark, self.colour_bar,
                         self.row_best_mark, self.verified_mark, self.verified_points):
                item.setVisible(False)
            self.spread.hide()
            self.row_best = {}
            self.left.set_labels([])
            self.bottom.set_labels([])
            self.plot.setLabel("left", "")
            self.plot.setLabel("bottom", "")
            self.plot.setTitle(None)
            self.estimated.setVisible(False)
            self._offer_rows(None)
            self._shape = None
            self.chosen = None
            return
        self._offer_rows(result)
        drawn = (result.values.shape, self.curve_row())
        same = self._shape == drawn
        names = list(result.axes)
        if self.is_curve():
            self._draw_curve(result)
        else:
            self._draw_grid(result, names)
        self._draw_verified(result)
        done = int(np.isfinite(result.values).sum()) if result.values.size else 0
        # (the title sets the plot's least width: an estimate's mark goes in a label that
        # wraps, above the plot)
        row = self.curve_row()
        shown = (f"{self.metric_name(result)} by {' × '.join(names)}" if row is None else
                 f"{self.metric_name(result)}, {names[0]} {labels_of(result, names[0])[row]}")
        over_set = result.per_input is not None and result.estimates is None
        if result.estimates is not None:
            self.estimated.setText(ESTIMATED + (f", {done} verified (outlined)" if done else ""))
            self.estimated.setToolTip("hover a cell for its estimate" +
                                      (" and its run" if done else ""))
        elif over_set:
            assert result.per_input is not None
            self.estimated.setText(f"{MEAN_OF} {len(result.per_input)} inputs")
            self.estimated.setToolTip("each cell is the mean of its metric over the inputs; "
                                      "hover one for its spread (the standard deviation over "
                                      "the inputs)")
        if result.estimates is None and done != result.cells:
            shown += f" ({done} of {result.cells} cells)"
        self.estimated.setStyleSheet("color: #8a5a00;" if result.estimates is not None
                                     else "color: #31577a;")
        self.estimated.setVisible(result.estimates is not None or over_set)
        self.plot.setTitle(shown, size="10pt")
        if not same:
            self._shape = drawn
            self.chosen = None
            self.marker.setVisible(False)
            self.point_mark.setVisible(False)
            self.plot.autoRange(padding=0.02)

    # -- the Show list: a grid whole, or one row as a curve --------------------------
    def _offer_rows(self, result: SweepResult | None) -> None:
        """The Show list offers the heat map and each row of a grid (the choice kept while
        the rows stay the same, across runs too; hidden for one axis or none)."""
        if result is None:
            self.show_row.setVisible(False)
            return
        names = list(result.axes)
        rows = labels_of(result, names[0]) if len(names) >= 2 else []
        wanted = [HEAT_MAP] + [f"curve of {names[0]} {r}" for r in rows]
        box = self.show_box
        if [box.itemText(i) for i in range(box.count())] != wanted:
            box.blockSignals(True)
            box.clear()
            box.addItems(wanted)
            box.setCurrentIndex(0)
            box.blockSignals(False)
        self.show_row.setVisible(bool(rows))

    def curve_row(self) -> int | None:
        """The row of a grid drawn as a curve (picked in the Show list), else ``None``."""
        i = self.show_box.currentIndex()
        return i - 1 if i > 0 and self.result is not None and self.result.values.ndim >= 2 \
            else None

    def show_row_curve(self, row: int | None) -> None:
        """Draw row ``row`` of the grid as a curve (``None``: the heat map)."""
        self.show_box.setCurrentIndex(0 if row is None else row + 1)

    def _on_show(self, _index: int) -> None:
        if self.result is not None:
            self.readout.setText(" ")   # what the mouse read belongs to the other drawing
            self.show_result(self.result)

    def is_curve(self) -> bool:
        """Whether a curve is drawn: a sweep of one axis, or a grid's row."""
        return self.result is not None and (self.result.values.ndim < 2
                                            or self.curve_row() is not None)

    def shown(self) -> np.ndarray:
        """The numbers drawn, in the sweep's shape: its estimates where it was estimated
        (the values then hold only the verified cells), else its values."""
        assert self.result is not None
        est = self.result.estimates
        return est if est is not None else self.result.values

    def grid(self) -> np.ndarray:
        """The numbers drawn, rows × columns (one column for one axis)."""
        v = self.shown()
        return v.reshape(v.shape[0], -1) if v.ndim else v.reshape(1, 1)

    def verified_cells(self) -> list[tuple[int, int]]:
        """The (row, column) of each cell of an estimated sweep that ran for real."""
        if self.result is None or self.result.estimates is None:
            return []
        v = self.result.values
        g = v.reshape(v.shape[0], -1) if v.ndim else v.reshape(1, 1)
        return [(int(r), int(c)) for r, c in zip(*np.nonzero(np.isfinite(g)))]

    def _draw_verified(self, result: SweepResult) -> None:
        cells = self.verified_cells()
        grid = not self.is_curve()
        path = QPainterPath()
        if grid:
            for r, c in cells:
                path.addRect(QRectF(c - 0.5, r - 0.5, 1, 1))
        self.verified_mark.setPath(path)
        self.verified_mark.setVisible(grid and bool(cells))
        points = [i for i in (self._point(r, c) for r, c in cells) if i is not None] \
            if not grid else []
        if points:
            x, _y, _sd, _name, _labels = self._curve_data(result)
            real = self._row_values(result.values)
            self.verified_points.setData(x[points], real[points])
        else:
            self.verified_points.setData([], [])
        self.verified_points.setVisible(bool(points))

    def _levels(self, finite: np.ndarray) -> tuple[str, float, float]:
        if not finite.size:
            return SEQUENTIAL, 0.0, 1.0
        lo, hi = float(finite.min()), float(finite.max())
        if lo < 0 < hi:
            m = max(-lo, hi)
            return DIVERGING, -m, m
        if hi == lo:
            pad = abs(hi) * 0.05 or 1.0
            return SEQUENTIAL, lo - pad, hi + pad
        return SEQUENTIAL, lo, hi

    def _draw_grid(self, result: SweepResult, names: list[str]) -> None:
        g = self.grid()
        rows, cols = g.shape
        finite = g[np.isfinite(g)]
        cmap, lo, hi = self._levels(finite)
        self.image.setImage(g.astype(np.float64), autoLevels=False, levels=(lo, hi))
        self.image.setColorMap(pg.colormap.get(cmap))
        self.image.setRect(QRectF(-0.5, -0.5, cols, rows))
        self.backdrop.setRect(QRectF(-0.5, -0.5, cols, rows))
        self.colour_bar.setColorMap(pg.colormap.get(cmap))
        self.colour_bar.setLevels((lo, hi))
        self.colour_bar.axis.setLabel(self.metric_name(result))
        for item in (self.image, self.backdrop, self.colour_bar):
            item.setVisible(True)
        for item in (self.curve, self.baseline_line, self.point_mark):
            item.setVisible(False)
        self.spread.hide()
        self.row_best = row_bests(g) if marks_row_bests(result) else {}
        self._place_row_bests()
        self.row_best_mark.setVisible(bool(self.row_best))
        self.plot.invertY(True)
        self.left.set_labels(labels_of(result, names[0]))
        self.bottom.set_labels(column_labels(result))
        self.plot.setLabel("left", names[0])
        self.plot.setLabel("bottom", " · ".join(names[1:]))
        self.plot.setLimits(xMin=-0.5 - cols, xMax=cols * 2, yMin=-0.5 - rows, yMax=rows * 2)

    def _place_row_bests(self) -> None:
        """Each row's star in its best cell's top-right corner, :data:`ROW_BEST_IN` pixels in
        from both edges (at most a third of the cell in: a small cell keeps its star)."""
        if not self.row_best:
            self.row_best_mark.setData([], [])
            return
        px, py = self.plot.vb.viewPixelSize()   # view units per pixel (rows grow downwards)
        dx, dy = min(ROW_BEST_IN * px, 1 / 3), min(ROW_BEST_IN * py, 1 / 3)
        self.row_best_mark.setData([c + 0.5 - dx for c in self.row_best.values()],
                                   [r - 0.5 + dy for r in self.row_best])

    def _x(self, result: SweepResult, name: str) -> np.ndarray:
        coords = result.coords[name]
        return np.asarray(coords, dtype=float) if numeric(coords) else np.arange(len(coords), dtype=float)

    def _row_values(self, values: np.ndarray) -> np.ndarray:
        """Numbers of the sweep's shape, as the curve drawn runs along them: all of a sweep
        of one axis, the chosen row of a grid."""
        row = self.curve_row()
        flat = np.asarray(values, dtype=np.float64)
        if row is None:
            return flat.reshape(-1)
        return flat.reshape(flat.shape[0], -1)[row]

    def _curve_data(self, result: SweepResult) -> tuple[np.ndarray, np.ndarray,
                                                        np.ndarray | None, str, list[str]]:
        """``(x, y, spread, axis name, tick labels)`` of the curve: a sweep of one axis, or
        one row of a grid along its columns (its second axis; past two, their combinations)."""
        names = list(result.axes)
        y = self._row_values(self.shown())
        spread = (self._row_values(result.spread)
                  if result.spread is not None and result.estimates is None else None)
        name = names[0] if self.curve_row() is None else " · ".join(names[1:])
        if name in result.coords and numeric(result.coords[name]):
            return self._x(result, name), y, spread, name, []
        labels = labels_of(result, name) if name in result.coords else column_labels(result)
        return np.arange(len(labels), dtype=float), y, spread, name, labels

    def _draw_curve(self, result: SweepResult) -> None:
        x, y, spread, name, labels = self._curve_data(result)
        self.plot.invertY(False)
        self.plot.setLimits(xMin=None, xMax=None, yMin=None, yMax=None)
        self.curve.setData(x, y)
        self.curve.setVisible(True)
        base = result.baseline
        self.baseline_line.setVisible(base is not None and math.isfinite(base))
        if base is not None and math.isfinite(base):
            self.baseline_line.setValue(base)
        for item in (self.image, self.backdrop, self.colour_bar, self.marker, self.hover_mark,
                     self.row_best_mark):
            item.setVisible(False)
        self.row_best = {}
        self.spread.draw(x, y, spread)
        self.plot.enableAutoRange()   # a curve's y range grows as its points arrive
        self.plot.vb.updateAutoRange()   # now, not at the next paint: a hover maps by it
        self.left.set_labels([])
        self.bottom.set_labels(labels)
        self.plot.setLabel("left", self.metric_name(result))
        self.plot.setLabel("bottom", name)

    # -- pointing ------------------------------------------------------------------
    def _point(self, row: int, col: int) -> int | None:
        """The curve's point of cell (row, column), or ``None`` where the curve (a grid's
        other row) does not draw it."""
        chosen = self.curve_row()
        if chosen is None:
            return row
        return col if row == chosen else None

    def _cell(self, point: int) -> tuple[int, int]:
        """The cell (row, column) of the curve's point ``point``."""
        chosen = self.curve_row()
        return (point, 0) if chosen is None else (chosen, point)

    def cell_at(self, scene_pos: QPointF) -> tuple[int, int] | None:
        """The cell (row, column) under a scene point, or ``None``."""
        if self.result is None or not self.plot.sceneBoundingRect().contains(scene_pos):
            return None
        p = self.plot.vb.mapSceneToView(scene_pos)
        if not self.is_curve():
            rows, cols = self.grid().shape
            r, c = int(math.floor(p.y() + 0.5)), int(math.floor(p.x() + 0.5))
            return (r, c) if 0 <= r < rows and 0 <= c < cols else None
        x = self._curve_data(self.result)[0]
        if not x.size:
            return None
        # the nearest point in screen pixels along x
        px = np.array([self.plot.vb.mapViewToScene(QPointF(float(v), p.y())).x() for v in x])
        i = int(np.argmin(np.abs(px - scene_pos.x())))
        return self._cell(i) if abs(px[i] - scene_pos.x()) <= 24 else None

    def cell_center(self, row: int, col: int = 0) -> QPointF:
        """The scene point at the middle of a cell (or at a curve's point)."""
        assert self.result is not None
        if not self.is_curve():
            return self.plot.vb.mapViewToScene(QPointF(col, row))
        point = self._point(row, col)
        assert point is not None, "the curve drawn does not show this cell"
        x, y, _sd, _name, _labels = self._curve_data(self.result)
        v = float(y[point])
        return self.plot.vb.mapViewToScene(QPointF(float(x[point]), v if math.isfinite(v) else 0.0))

    def describe(self, row: int, col: int) -> str:
        """The read-out of a cell: its coordinates (labels in full) and its number."""
        assert self.result is not None
        names = list(self.result.axes)
        where = [f"{names[0]} {labels_of(self.result, names[0])[row]}"]
        if len(names) > 1:
            where.append(f"{' · '.join(names[1:])} {column_labels(self.result)[col]}")
        v = float(self.grid()[row, col])
        shown = f"{v:.6g}" if math.isfinite(v) else "not run yet"
        base = "" if self.result.baseline is None else f" (baseline {self.result.baseline:.6g})"
        if self.result.estimates is not None:
            shown = f"{v:.6g} (first-order estimate)" if math.isfinite(v) else "no estimate"
            g = self.result.values
            real = float(g.reshape(g.shape[0], -1)[row, col] if g.ndim else g)
            if math.isfinite(real):
                shown += f", run: {real:.6g}"
        spread, per = self.result.spread, self.result.per_input
        row_best = not self.is_curve() and self.row_best.get(row) == col
        if (spread is not None and per is not None and math.isfinite(v)
                and self.result.estimates is None):
            sd = float(spread.reshape(spread.shape[0], -1)[row, col])
            best = (" (the largest mean)" if self.spread.best is not None and self.is_curve()
                    and self._point(row, col) == self.spread.best else "")
            best = " (the row's largest mean)" if row_best else best
            shown = f"{v:.6g} ± {sd:.3g} over {len(per)} inputs{best}"
        elif row_best:
            shown += (" (the row's largest)" if self.result.estimates is None
                      else " (the row's largest estimate)")
        sign = "=" if self.result.estimates is None else "≈"
        return f"{' · '.join(where)}: {self.metric_name(self.result)} {sign} {shown}{base}"

    def _on_move(self, scene_pos: QPointF) -> None:
        cell = self.cell_at(scene_pos)
        if cell is None:
            self.hover_mark.setVisible(False)
            self.readout.setText("click a cell to show its run in the main view"
                                 if self.result is not None else " ")
            return
        self.readout.setText(self.describe(*cell))
        if self.result is not None and not self.is_curve():
            self.hover_mark.setRect(QRectF(cell[1] - 0.5, cell[0] - 0.5, 1, 1))
            self.hover_mark.setVisible(True)

    def _on_click(self, event: Any) -> None:
        if event.button() != Qt.MouseButton.LeftButton:
            return
        cell = self.cell_at(event.scenePos())
        if cell is None:
            return
        event.accept()
        self.mark(*cell)
        self.cellChosen.emit(*cell)

    def mark(self, row: int, col: int = 0) -> None:
        """Outline the cell whose run the main view shows."""
        self.chosen = (row, col)
        if self.result is not None and not self.is_curve():
            self.marker.setRect(QRectF(col - 0.5, row - 0.5, 1, 1))
            self.marker.setVisible(True)
        elif self.result is not None and self._point(row, col) is not None:
            c = self.cell_center(row, col)
            p = self.plot.vb.mapSceneToView(c)
            self.point_mark.setData([p.x()], [p.y()])
            self.point_mark.setVisible(True)
