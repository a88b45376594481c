"""SAE features of one layer, one row per position: the token, the top features
(``index=activation``) without and with the interventions, and the relative
reconstruction error of each run. A cell whose features the interventions
changed is bold. Draws a :class:`~hookscope.core.SaeReport`; a chooser picks
the layer when several have an SAE.
"""

from __future__ import annotations

from PySide6.QtGui import QFont
from PySide6.QtWidgets import (QComboBox, QHBoxLayout, QHeaderView, QLabel, QTableWidget,
                               QTableWidgetItem, QVBoxLayout, QWidget)

from hookscope.core.analyses import SaeFeatures, SaeReport
from hookscope.widgets.named import named

HEADERS = ["pos", "token", "features without", "features with", "error without", "error with"]


def features_text(row: list[tuple[int, float]], n: int = 4) -> str:
    return "  ".join(f"{i}={a:.2f}" for i, a in row[:n]) or "none active"


class SaeView(QWidget):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("saeView")
        self.layer = named(QComboBox(), "saeLayer")
        self.layer.currentTextChanged.connect(lambda _t: self._redraw())
        self.note = named(QLabel(), "saeNote")
        self.note.setWordWrap(True)
        self.table = QTableWidget(0, len(HEADERS), objectName="saeTable")  # type: ignore[call-overload]
        self.table.setHorizontalHeaderLabels(HEADERS)
        self.table.verticalHeader().hide()
        self.table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        self.table.horizontalHeader().setStretchLastSection(True)
        bar = QHBoxLayout()
        bar.addWidget(QLabel("layer"))
        bar.addWidget(self.layer, 1)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(2, 2, 2, 2)
        lay.addLayout(bar)
        lay.addWidget(self.note)
        lay.addWidget(self.table, 1)
        self.report: SaeReport | None = None
        self.tokens: list[str] = []
        self.note.setText("File → Attach SAE attaches a sparse autoencoder to the selected layer.")

    def show_report(self, report: SaeReport | None, tokens: list[str] | None = None) -> None:
        self.report, self.tokens = report, list(tokens or [])
        layers = list(report) if report else []
        if [self.layer.itemText(i) for i in range(self.layer.count())] != layers:
            self.layer.blockSignals(True)
            current = self.layer.currentText()
            self.layer.clear()
            self.layer.addItems(layers)
            if current in layers:
                self.layer.setCurrentText(current)
            self.layer.blockSignals(False)
        self._redraw()

    def current(self) -> SaeFeatures | None:
        if not self.report:
            return None
        return self.report.get(self.layer.currentText()) or next(iter(self.report.values()))

    def _redraw(self) -> None:
        f = self.current()
        self.table.setRowCount(0 if f is None else len(f.top_without))
        if f is None:
            return
        bold = QFont()
        bold.setBold(True)
        for p, (a, b) in enumerate(zip(f.top_without, f.top_with)):
            token = self.tokens[p] if p < len(self.tokens) else ""
            cells = [str(p), token, features_text(a), features_text(b),
                     f"{f.error_without[p]:.4f}", f"{f.error_with[p]:.4f}"]
            for c, text in enumerate(cells):
                item = QTableWidgetItem(text)
                if c == 3 and a[:4] != b[:4]:
                    item.setFont(bold)
                if c in (2, 3):
                    item.setToolTip(features_text(a if c == 2 else b, 50))
                self.table.setItem(p, c, item)
        mean = sum(f.active_without) / max(1, len(f.active_without))
        self.note.setText(f"{f.layer}: {f.d_sae} features, {mean:.1f} active a position "
                          "without the interventions; error = |x − decode(encode(x))| / |x|.")
