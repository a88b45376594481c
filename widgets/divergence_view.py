"""A model diff drawn: the layers in execution order against their relative change on a log
axis, the tolerance as a line, the first divergent layer marked; a click on a point asks
for that layer (``layerChosen(path, call)``); its Close comparison button asks to end the
comparison (``closeRequested``).

Rows whose outputs are equal (relative change 0) have no place on a log axis: they sit on
a dotted floor line labelled as such, a decade below the smallest change, drawn hollow,
and the read-out says "equal". Points within the
tolerance are blue, points past it orange, and the first of those a larger red star.

What has no point is said in a line under the plot: the layers only one model ran (no
row to draw) and the diff's notes (calls one model made more often than the other, a
model B in another dtype), a few names each with a count of the rest; the full lists in
its tooltip.
"""

from __future__ import annotations

import html
import math
from typing import Any

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QPointF, Qt, Signal
from PySide6.QtWidgets import QHBoxLayout, QLabel, QPushButton, QVBoxLayout, QWidget

from hookscope.core.analyses import DiffResult
from hookscope.widgets.named import named
from hookscope.widgets.plot_style import plain_axes
from hookscope.widgets.sweep_plot import LabelAxis

WITHIN = (31, 119, 180)
PAST = (255, 127, 14)
FIRST = (214, 39, 40)
PICK_PX = 24   # a click this close to a point (in pixels, along x) picks it
NAMED = 4      # layers named in the line under the plot (per model), the rest counted
TIP_NAMED = 40   # and in its tooltip


def floor_of(values: list[float], tolerance: float) -> float:
    """Where an equal row (relative change 0) sits: a decade below the smallest change shown
    (the tolerance counts), so it never hides among the real ones."""
    positive = [v for v in values if v > 0 and math.isfinite(v)]
    low = min(positive + ([tolerance] if tolerance > 0 else []), default=1e-6)
    return 10 ** (math.floor(math.log10(low)) - 1)


def few(paths: tuple[str, ...], n: int) -> str:
    """The first ``n`` of ``paths``, and how many more there are."""
    shown = ", ".join(paths[:n])
    return shown + (f" and {len(paths) - n} more" if len(paths) > n else "")


def unaligned_text(result: DiffResult, n: int = NAMED) -> str:
    """What the plot cannot show: the layers only one model ran (``n`` of each named) and
    the diff's notes, one line each; ``""`` when there are none."""
    lines = [f"only in {model} ({len(paths)}): {few(paths, n)}"
             for model, paths in (("B", result.only_in_b), ("A", result.only_in_a)) if paths]
    return "\n".join(([" · ".join(lines)] if lines else []) + list(result.notes))


class DivergenceView(QWidget):
    """One :class:`DiffResult` as a curve of relative change by layer, and a read-out line."""

    layerChosen = Signal(str, int)   # path, call
    closeRequested = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.result: DiffResult | None = None
        self.logs = np.zeros(0)  # log10 of each row's relative change (the floor for 0)
        self.bottom = LabelAxis("bottom")
        self.graphics = named(pg.GraphicsLayoutWidget(self), "divergencePlot")
        self.graphics.setBackground("w")
        self.graphics.setMinimumHeight(160)
        self.plot = plain_axes(self.graphics.addPlot(row=0, col=0,
                                                     axisItems={"bottom": self.bottom}))
        self.plot.setMenuEnabled(False)
        self.plot.hideButtons()
        # log10 of the changes drawn on a linear view, the left axis labelled in powers of ten
        self.plot.getAxis("left").setLogMode(False, True)
        self.plot.setLabel("left", "relative change ||a-b|| / ||a||")
        self.plot.setLabel("bottom", "layer (execution order)")
        self.curve = pg.PlotDataItem(pen=pg.mkPen((150, 150, 150), width=1))
        self.plot.addItem(self.curve)
        self.points = pg.ScatterPlotItem(size=8, pen=None)
        self.plot.addItem(self.points)
        self.first = pg.ScatterPlotItem(size=18, symbol="star", pen=pg.mkPen((0, 0, 0), width=1),
                                        brush=pg.mkBrush(FIRST))
        self.first.setZValue(10)
        self.plot.addItem(self.first)
        self.chosen_mark = pg.ScatterPlotItem(size=16, pen=pg.mkPen((0, 0, 0), width=2),
                                              brush=None)
        self.chosen_mark.setZValue(11)
        self.plot.addItem(self.chosen_mark)
        self.tolerance_line = pg.InfiniteLine(angle=0, movable=False, pen=pg.mkPen(
            FIRST, width=1, style=Qt.PenStyle.DashLine), label="tolerance",
            labelOpts={"position": 0.03, "color": FIRST, "anchors": [(0, 1), (0, 1)]})
        self.plot.addItem(self.tolerance_line)
        self.equal_line = pg.InfiniteLine(angle=0, movable=False, pen=pg.mkPen(
            (170, 170, 170), width=1, style=Qt.PenStyle.DotLine), label="equal in A and B (0)",
            labelOpts={"position": 0.97, "color": (110, 110, 110), "anchors": [(1, 1), (1, 1)]})
        self.plot.addItem(self.equal_line)
        # the layers only one model ran, and the diff's notes (hidden when there are none)
        self.unaligned = named(QLabel(""), "divergenceUnaligned")
        self.unaligned.setWordWrap(True)
        self.unaligned.setTextFormat(Qt.TextFormat.PlainText)
        self.unaligned.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.unaligned.setStyleSheet("color: #5a4a00;")
        self.unaligned.setVisible(False)
        self.readout = named(QLabel(" "), "divergenceReadout")
        self.readout.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.readout.setWordWrap(True)
        self.close_button = named(QPushButton("Close comparison"), "divergenceClose")
        self.close_button.setToolTip("End the comparison: the layer panels show the run "
                                     "without and with the interventions again")
        self.close_button.clicked.connect(self.closeRequested)
        row = QHBoxLayout()
        row.addWidget(self.readout, 1)
        row.addWidget(self.close_button, 0, Qt.AlignmentFlag.AlignTop)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addWidget(self.graphics, 1)
        lay.addWidget(self.unaligned)
        lay.addLayout(row)
        self.chosen: int | None = None
        self.graphics.scene().sigMouseClicked.connect(self._on_click)
        self.show_result(None)

    # -- drawing -------------------------------------------------------------------
    def show_result(self, result: DiffResult | None) -> None:
        """Draw ``result`` (``None``: empty)."""
        self.result = result
        self.chosen = None
        self.chosen_mark.setVisible(False)
        self._say_unaligned(result)
        if result is None or not result.layers:
            self.logs = np.zeros(0)
            for item in (self.curve, self.points, self.first, self.tolerance_line,
                         self.equal_line):
                item.setVisible(False)
            self.bottom.set_labels([])
            self.plot.setTitle(None)
            self.readout.setText(" ")
            return
        rels = [r.relative_change for r in result.layers]
        floor = floor_of(rels, result.tolerance)
        self.logs = np.log10(np.array([v if v > 0 and math.isfinite(v) else
                                    (floor if v == 0 else np.nan) for v in rels],
                                   dtype=np.float64))
        x = np.arange(len(rels), dtype=np.float64)
        shown = np.isfinite(self.logs)
        self.curve.setData(x[shown], self.logs[shown])
        brushes = [pg.mkBrush(PAST if r.passes(result.tolerance) else WITHIN)
                   for r in result.layers]
        pens = [pg.mkPen(WITHIN, width=1.5) if v == 0 else pg.mkPen(None) for v in rels]
        # a hollow point where the outputs are equal
        self.points.setData(x=x[shown], y=self.logs[shown],
                            brush=[pg.mkBrush(None) if v == 0 else b
                                   for v, b, s in zip(rels, brushes, shown) if s],
                            pen=[p for p, s in zip(pens, shown) if s])
        first = result.first_divergent
        k = result.layers.index(first) if first is not None else None
        self.first.setData([float(k)] if k is not None and shown[k] else [],
                           [self.logs[k]] if k is not None and shown[k] else [])
        self.tolerance_line.setValue(math.log10(result.tolerance) if result.tolerance > 0
                                     else math.log10(floor))
        for item in (self.curve, self.points, self.first, self.tolerance_line):
            item.setVisible(True)
        self.equal_line.setValue(math.log10(floor))
        self.equal_line.setVisible(any(v == 0 for v in rels))
        self.first.setVisible(k is not None)
        self.bottom.set_labels([r.path if r.call == 0 else f"{r.path}#{r.call}"
                                for r in result.layers])
        self.plot.setTitle("first past the tolerance: " + (
            "none" if first is None else f"{first.path} (call {first.call})"), size="10pt")
        self.plot.enableAutoRange()
        self.plot.vb.updateAutoRange()   # now, not at the next paint: a click maps by it
        self.readout.setText("click a point to show that layer as model A against model B")

    def _say_unaligned(self, result: DiffResult | None) -> None:
        text = unaligned_text(result) if result is not None else ""
        self.unaligned.setText(text)
        # the tooltip as rich text that wraps, a layer's name escaped (never read as markup)
        tip = unaligned_text(result, TIP_NAMED) if result is not None and text else ""
        self.unaligned.setToolTip("<p>" + html.escape(tip).replace("\n", "<br>") + "</p>"
                                  if tip else "")
        self.unaligned.setVisible(bool(text))

    # -- pointing ------------------------------------------------------------------
    def point_center(self, index: int) -> QPointF:
        """The scene point of row ``index``'s point."""
        y = float(self.logs[index]) if np.isfinite(self.logs[index]) else 0.0
        self.plot.vb.updateAutoRange()   # a resize since the last paint: map by the range now
        return self.plot.vb.mapViewToScene(QPointF(float(index), y))

    def row_at(self, scene_pos: QPointF) -> int | None:
        """The row whose point is nearest a scene point along x (within a few pixels)."""
        if self.result is None or not self.logs.size \
                or not self.plot.sceneBoundingRect().contains(scene_pos):
            return None
        xs = np.array([self.point_center(i).x() for i in range(self.logs.size)])
        i = int(np.argmin(np.abs(xs - scene_pos.x())))
        return i if abs(xs[i] - scene_pos.x()) <= PICK_PX else None

    def describe(self, index: int) -> str:
        assert self.result is not None
        r = self.result.layers[index]
        if r.relative_change == 0:
            return f"{r.path} (call {r.call}): equal in A and B"
        cos = "-" if r.cosine is None else f"{r.cosine:.6f}"
        return (f"{r.path} (call {r.call}): relative change {r.relative_change:.4g}, "
                f"max |a-b| {r.max_abs_diff:.4g}, cosine {cos}"
                + (f" ({r.note})" if r.note else ""))

    def _on_click(self, event: Any) -> None:
        if event.button() != Qt.MouseButton.LeftButton:
            return
        i = self.row_at(event.scenePos())
        if i is None:
            return
        event.accept()
        self.choose(i)
        assert self.result is not None
        row = self.result.layers[i]
        self.layerChosen.emit(row.path, row.call)

    def choose(self, index: int) -> None:
        """Ring row ``index``'s point and say what it is."""
        self.chosen = index
        c = self.plot.vb.mapSceneToView(self.point_center(index))
        self.chosen_mark.setData([c.x()], [c.y()])
        self.chosen_mark.setVisible(True)
        self.readout.setText(self.describe(index))
