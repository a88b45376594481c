"""Attention patterns drawn: a grid of heads, each a query × key map with token labels.

A chooser picks the attention module of an
:class:`~hookscope.core.analyses.AttentionResult`, another what each map shows: the
probabilities without the interventions, with them, or the difference (with − without,
on a blue-white-red map centred on zero). Query positions run down (position 0 at the
top), keys across. Hovering a cell reads out the head, the query and key tokens and the
probability without and with; a click on a head asks to aim ``@heads=`` at it
(``headClicked(layer, head)``: the window sets the layer's intervention to act on that
head). Holds no state beyond what it shows; the numbers are the result's own.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QPointF, QRectF, Qt, Signal
from PySide6.QtWidgets import (QComboBox, QGraphicsRectItem, QHBoxLayout, QLabel, QVBoxLayout,
                               QWidget)

from hookscope.core.analyses import AttentionResult
from hookscope.widgets.named import named
from hookscope.widgets.plot_style import plain_axes
from hookscope.widgets.sweep_plot import DIVERGING, LabelAxis

WITHOUT, WITH, DIFFERENCE = "without", "with", "difference"
PROBABILITIES = "viridis"


def shown(text: str) -> str:
    """A token as a label shows it: blanks and controls made visible."""
    return text.replace(" ", "␣").replace("\n", "⏎").replace("\t", "⇥").replace("\r", "\\r") or "∅"


class AttentionView(QWidget):
    """The layer and view choosers, the heads' maps and a read-out line."""

    headClicked = Signal(str, int)   # the layer as asked, the head

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("attentionView")
        self.result: AttentionResult | None = None
        self.layer = named(QComboBox(), "attentionLayer")
        self.which = named(QComboBox(), "attentionWhich")
        self.which.addItems([WITHOUT, WITH, DIFFERENCE])
        self.which.setCurrentText(WITH)
        self.graphics = named(pg.GraphicsLayoutWidget(self), "attentionGrid")
        self.graphics.setBackground("w")
        self.graphics.setMinimumHeight(200)
        self.readout = named(QLabel(" "), "attentionReadout")
        self.readout.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.readout.setWordWrap(True)
        bar = QHBoxLayout()
        bar.addWidget(QLabel("layer"))
        bar.addWidget(self.layer, 1)
        bar.addWidget(QLabel("show"))
        bar.addWidget(self.which)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addLayout(bar)
        lay.addWidget(self.graphics, 1)
        lay.addWidget(self.readout)
        self.plots: list[pg.PlotItem] = []
        self.images: list[pg.ImageItem] = []
        self.marks: list[QGraphicsRectItem] = []   # the hovered cell, one per head
        self.colour_bar: pg.ColorBarItem | None = None
        self._shape: tuple[int, ...] | None = None
        self.layer.currentTextChanged.connect(lambda _t: self._draw())
        self.which.currentTextChanged.connect(lambda _t: self._draw())
        self.graphics.scene().sigMouseMoved.connect(self._on_move)
        self.graphics.scene().sigMouseClicked.connect(self._on_click)

    # -- what is shown ------------------------------------------------------------------
    def show_result(self, result: AttentionResult | None) -> None:
        """Draw ``result`` (``None``: nothing), keeping the chosen layer where it has it."""
        self.result = result
        layers = list(result.layers) if result is not None else []
        keep = self.layer.currentText()
        self.layer.blockSignals(True)
        self.layer.clear()
        self.layer.addItems(layers)
        if keep in layers:
            self.layer.setCurrentText(keep)
        self.layer.blockSignals(False)
        self._draw()

    def maps(self) -> np.ndarray:
        """The numbers drawn, ``(heads, queries, keys)`` (empty without a result)."""
        a = self._attention()
        if a is None:
            return np.zeros((0, 0, 0))
        row = min(self.result.row if self.result else 0, a.with_.shape[0] - 1)
        without, with_ = a.without[row].double().numpy(), a.with_[row].double().numpy()
        which = self.which.currentText()
        return without if which == WITHOUT else with_ if which == WITH else with_ - without

    def _attention(self) -> Any:
        if self.result is None or self.layer.currentText() not in self.result.layers:
            return None
        return self.result.layers[self.layer.currentText()]

    def _labels(self, n: int) -> list[str]:
        tokens = self.result.tokens if self.result is not None else []
        return [shown(t) for t in tokens] if len(tokens) == n else [str(i) for i in range(n)]

    def _draw(self) -> None:
        grid = self.maps()
        if grid.shape != self._shape:
            self._build(grid.shape[0])
            self._shape = grid.shape
        if not grid.size:
            self.readout.setText(" ")
            return
        heads, tq, tk = grid.shape
        if self.which.currentText() == DIFFERENCE:
            m = float(np.abs(grid).max()) or 1e-12
            cmap, levels = pg.colormap.get(DIVERGING), (-m, m)
        else:
            cmap, levels = pg.colormap.get(PROBABILITIES), (0.0, 1.0)
        keys, queries = self._labels(tk), self._labels(tq)
        for h, (plot, image) in enumerate(zip(self.plots, self.images)):
            image.setImage(grid[h], autoLevels=False, levels=levels)
            image.setColorMap(cmap)
            image.setRect(QRectF(-0.5, -0.5, tk, tq))
            plot.setRange(xRange=(-0.5, tk - 0.5), yRange=(-0.5, tq - 0.5), padding=0)
            plot.getAxis("bottom").set_labels(keys)
            plot.getAxis("left").set_labels(queries)
        if self.colour_bar is not None:
            self.colour_bar.setColorMap(cmap)
            self.colour_bar.setLevels(levels)
        self.readout.setText("hover a cell for its tokens and probability; click a head to act "
                             "on it (@heads=)")

    def _build(self, heads: int) -> None:
        """One plot per head (remade only when the number of heads changes)."""
        self.graphics.clear()
        self.plots, self.images, self.marks = [], [], []
        per_row = max(1, math.ceil(math.sqrt(heads)))
        for h in range(heads):
            plot = plain_axes(self.graphics.addPlot(
                row=h // per_row, col=h % per_row,
                axisItems={"bottom": LabelAxis("bottom"), "left": LabelAxis("left")}))
            plot.setTitle(f"head {h}", size="9pt")
            plot.setMenuEnabled(False)
            plot.hideButtons()
            plot.invertY(True)
            image = pg.ImageItem(axisOrder="row-major")
            plot.addItem(image)
            mark = QGraphicsRectItem()
            mark.setPen(pg.mkPen((255, 140, 0), width=2, cosmetic=True))
            mark.setZValue(20)
            mark.setVisible(False)
            plot.addItem(mark)
            self.plots.append(plot)
            self.images.append(image)
            self.marks.append(mark)
        self.colour_bar = None
        if heads:
            self.colour_bar = pg.ColorBarItem(values=(0.0, 1.0), interactive=False, width=12,
                                              colorMap=pg.colormap.get(PROBABILITIES),
                                              colorMapMenu=False)
            self.colour_bar.axis.enableAutoSIPrefix(False)
            self.colour_bar.axis.setSIPrefixEnableRanges(())
            self.graphics.addItem(self.colour_bar, row=0, col=per_row,
                                  rowspan=math.ceil(heads / per_row))

    # -- the mouse ----------------------------------------------------------------------
    def cell_at(self, scene_pos: QPointF) -> tuple[int, int, int] | None:
        """(head, query, key) under a scene point, or ``None``."""
        grid = self.maps()
        for h, plot in enumerate(self.plots):
            if not plot.vb.sceneBoundingRect().contains(scene_pos):
                continue
            p = plot.vb.mapSceneToView(scene_pos)
            q, k = int(math.floor(p.y() + 0.5)), int(math.floor(p.x() + 0.5))
            if 0 <= q < grid.shape[1] and 0 <= k < grid.shape[2]:
                return h, q, k
        return None

    def cell_center(self, head: int, query: int, key: int) -> QPointF:
        """The scene point at the middle of a cell of a head's map."""
        return self.plots[head].vb.mapViewToScene(QPointF(key, query))

    def describe(self, head: int, query: int, key: int) -> str:
        a = self._attention()
        assert a is not None and self.result is not None
        row = min(self.result.row, a.with_.shape[0] - 1)
        tq, tk = a.with_.shape[-2:]
        b, w = float(a.without[row, head, query, key]), float(a.with_[row, head, query, key])
        return (f"{a.layer} head {head}: query {query} {self._labels(tq)[query]} → key {key} "
                f"{self._labels(tk)[key]}: p without {b:.4f}, with {w:.4f} "
                f"(difference {w - b:+.4f})")

    def _on_move(self, scene_pos: QPointF) -> None:
        cell = self.cell_at(scene_pos)
        for mark in self.marks:
            mark.setVisible(False)
        if cell is None:
            return
        h, q, k = cell
        self.readout.setText(self.describe(h, q, k))
        self.marks[h].setRect(QRectF(k - 0.5, q - 0.5, 1, 1))
        self.marks[h].setVisible(True)

    def _on_click(self, event: Any) -> None:
        if event.button() != Qt.MouseButton.LeftButton:
            return
        cell = self.cell_at(event.scenePos())
        a = self._attention()
        if cell is None or a is None:
            return
        event.accept()
        self.readout.setText(f"acting on head {cell[0]} of {a.layer} (@heads={cell[0]})")
        self.headClicked.emit(a.layer, cell[0])
