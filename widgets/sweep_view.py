"""The Sweep dock: a template, its axes and a metric; Run and Cancel with a progress bar;
the grid as a heatmap whose rows and columns are labelled by the axes' values (layer names,
token strings), each cell's number in a hover read-out. One axis shows one column.
Double-clicking a cell asks for that cell's run in the main view (``cellChosen``).

Holds no state beyond what it shows: Run and Cancel are signals the app answers.
"""

from __future__ import annotations

import math
from typing import Any

from PySide6.QtCore import QAbstractTableModel, QModelIndex, QPersistentModelIndex, Qt, Signal
from PySide6.QtGui import QBrush, QColor
from PySide6.QtWidgets import (QComboBox, QFormLayout, QHBoxLayout, QLabel, QLineEdit,
                               QProgressBar, QPushButton, QTableView, QVBoxLayout, QWidget)

from hookscope.core.capture import METRICS, SweepResult
from hookscope.widgets.named import named

_Index = QModelIndex | QPersistentModelIndex


def heat(t: float) -> QColor:
    """White at the grid's smallest number to a deep red at its largest."""
    t = min(max(t, 0.0), 1.0)
    return QColor(255, int(255 - 180 * t), int(255 - 200 * t))


class SweepModel(QAbstractTableModel):
    """Rows along the first axis, columns along the second (one column for one axis)."""

    def __init__(self) -> None:
        super().__init__()
        self.result: SweepResult | None = None

    def set_result(self, result: SweepResult | None) -> None:
        self.beginResetModel()
        self.result = result
        self.endResetModel()

    def _grid(self) -> Any:
        assert self.result is not None
        v = self.result.values
        return v.reshape(v.shape[0], -1)

    def rowCount(self, parent: _Index = QModelIndex()) -> int:  # noqa: N802 - Qt override
        return 0 if self.result is None or parent.isValid() else self._grid().shape[0]

    def columnCount(self, parent: _Index = QModelIndex()) -> int:  # noqa: N802 - Qt override
        return 0 if self.result is None or parent.isValid() else self._grid().shape[1]

    def _names(self) -> list[str]:
        assert self.result is not None
        return list(self.result.axes)

    def headerData(self, section: int, orientation: Qt.Orientation,  # noqa: N802 - Qt override
                   role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if self.result is None or role != Qt.ItemDataRole.DisplayRole:
            return None
        names = self._names()
        if orientation == Qt.Orientation.Vertical:
            return self.result.axes[names[0]][section]
        return self.result.axes[names[1]][section] if len(names) == 2 else self.result.metric

    def data(self, index: _Index, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if self.result is None or not index.isValid():
            return None
        grid = self._grid()
        v = float(grid[index.row(), index.column()])
        if role == Qt.ItemDataRole.DisplayRole:
            return f"{v:.3g}"
        if role == Qt.ItemDataRole.BackgroundRole:
            finite = grid[~(grid != grid)]
            lo, hi = (float(finite.min()), float(finite.max())) if finite.size else (0.0, 0.0)
            t = 0.0 if not math.isfinite(v) or hi == lo else (v - lo) / (hi - lo)
            return QBrush(heat(t))
        if role == Qt.ItemDataRole.ToolTipRole:
            names = self._names()
            where = [f"{names[0]} {self.result.axes[names[0]][index.row()]}"]
            if len(names) == 2:
                where.append(f"{names[1]} {self.result.axes[names[1]][index.column()]}")
            base = "" if self.result.baseline is None else f" (baseline {self.result.baseline:.6g})"
            return f"{', '.join(where)}: {self.result.metric} = {v:.6g}{base}"
        return None


class SweepView(QWidget):
    """Fields, Run/Cancel, progress and the grid."""

    runRequested = Signal(str, str, str, str)  # axes, template, source input, metric
    cancelRequested = Signal()
    cellChosen = Signal(int, int)  # row, column of a double-clicked cell

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.axes = named(QLineEdit("layer=blocks.*; pos=all"), "sweepAxes")
        self.axes.setToolTip("AXIS=VALUES separated by ';': a layer pattern, pos=all, A:B, "
                             "a comma list, linspace(A,B,N)")
        self.template = named(QLineEdit("{layer}=patch@pos={pos}"), "sweepTemplate")
        self.template.setToolTip("LAYER=KIND with {AXIS} placeholders; several separated by ';'")
        self.source = named(QLineEdit(""), "sweepSource")
        self.source.setPlaceholderText("text:... (the input a bare patch takes)")
        self.metric_box = named(QComboBox(), "sweepMetric")
        self.metric_box.setEditable(True)
        self.metric_box.addItems(["kl", "max-abs-diff", "top-changed", "logit-diff:A,B", "prob:T"])
        self.metric_box.setToolTip("what each cell measures: " + ", ".join(METRICS))
        self.run_button = named(QPushButton("Run sweep"), "sweepRun")
        self.cancel_button = named(QPushButton("Cancel"), "sweepCancel")
        self.cancel_button.setEnabled(False)
        self.progress = named(QProgressBar(), "sweepProgress")
        self.progress.setVisible(False)
        self.note = named(QLabel(""), "sweepNote")
        self.note.setWordWrap(True)
        self.model = SweepModel()
        self.table = named(QTableView(), "sweepTable")
        self.table.setModel(self.model)
        self.table.setMouseTracking(True)
        form = QFormLayout()
        form.addRow("Axes", self.axes)
        form.addRow("Template", self.template)
        form.addRow("Source input", self.source)
        form.addRow("Metric", self.metric_box)
        buttons = QHBoxLayout()
        buttons.addWidget(self.run_button)
        buttons.addWidget(self.cancel_button)
        buttons.addWidget(self.progress, 1)
        lay = QVBoxLayout(self)
        lay.addLayout(form)
        lay.addLayout(buttons)
        lay.addWidget(self.note)
        lay.addWidget(self.table, 1)
        self.run_button.clicked.connect(self._run)
        self.cancel_button.clicked.connect(self.cancelRequested.emit)
        self.table.doubleClicked.connect(lambda i: self.cellChosen.emit(i.row(), i.column()))
        self.table.setToolTip("double-click a cell to run it in the main view")

    def _run(self) -> None:
        self.runRequested.emit(self.axes.text(), self.template.text(), self.source.text(),
                               self.metric_box.currentText())

    def set_running(self, total: int | None) -> None:
        """Running with ``total`` cells (``None``: stopped)."""
        running = total is not None
        self.run_button.setEnabled(not running)
        self.cancel_button.setEnabled(running)
        self.progress.setVisible(running)
        if running:
            self.progress.setRange(0, max(1, total or 1))
            self.progress.setValue(0)
            self.note.setText(f"{total} runs")

    def set_progress(self, done: int, total: int) -> None:
        self.progress.setRange(0, max(1, total))
        self.progress.setValue(done)

    def show_result(self, result: SweepResult | None) -> None:
        self.set_running(None)
        self.model.set_result(result)
        if result is not None:
            self.note.setText(f"{result.cells} runs, {result.timings_ms.get('total', 0) / 1e3:.2f} s")

    def show_note(self, text: str) -> None:
        self.set_running(None)
        self.note.setText(text)
