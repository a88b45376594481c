"""The Scan dock: a model over an input set. Open inputs, name a unit (``LAYER:IDX``),
Run and Cancel with a progress bar and an ETA; the unit's top inputs as thumbnails (images)
or text snippets with the token where the unit peaks highlighted; the per-input effect
table, sortable; clicking a top input (double-clicking a row of the table) asks for it in the
main view (``inputChosen``).

Holds no state beyond what it shows: Open, Run and Cancel are signals the app answers.
"""

from __future__ import annotations

import html
from typing import Any

import numpy as np
from PySide6.QtCore import QSize, QSortFilterProxyModel, Qt, Signal
from PySide6.QtGui import QIcon, QImage, QPixmap
from PySide6.QtWidgets import (QHBoxLayout, QLabel, QLineEdit, QListWidget, QListWidgetItem,
                               QProgressBar, QPushButton, QTableView, QTabWidget, QVBoxLayout,
                               QWidget)

from hookscope.core.analyses import ScanResult, TopInput
from hookscope.widgets.named import named
from hookscope.widgets.scan_effect_model import SORT_ROLE, EffectModel

THUMB = 72
INDEX_ROLE = Qt.ItemDataRole.UserRole + 2


def thumbnail(pixels: np.ndarray, size: int = THUMB) -> QPixmap:
    """``pixels`` (H x W grey or H x W x 3, any range) as a square-ish pixmap, min..max
    stretched to black..white; small images are enlarged without smoothing."""
    a = np.asarray(pixels, dtype=np.float64)
    finite = a[np.isfinite(a)]
    lo, hi = (float(finite.min()), float(finite.max())) if finite.size else (0.0, 1.0)
    a = np.nan_to_num((a - lo) / (hi - lo) if hi > lo else a * 0, nan=0.0)
    u8 = np.ascontiguousarray((np.clip(a, 0, 1) * 255).astype(np.uint8))
    h, w = u8.shape[:2]
    if u8.ndim == 2:
        img = QImage(u8.data, w, h, w, QImage.Format.Format_Grayscale8).copy()
    else:
        img = QImage(u8.data, w, h, 3 * w, QImage.Format.Format_RGB888).copy()
    mode = (Qt.TransformationMode.FastTransformation if max(h, w) < size
            else Qt.TransformationMode.SmoothTransformation)
    return QPixmap.fromImage(img.scaled(size, size, Qt.AspectRatioMode.KeepAspectRatio, mode))


def snippet(t: TopInput, around: int = 12) -> str:
    """HTML of the tokens around the one the unit peaked at, that one highlighted."""
    if not t.tokens or not 0 <= t.position < len(t.tokens):
        return html.escape(t.name)
    lo, hi = max(0, t.position - around), min(len(t.tokens), t.position + around + 1)
    parts = []
    for i in range(lo, hi):
        tok = html.escape(t.tokens[i])
        parts.append(f"<span style='background:#ffd54f;font-weight:bold'>{tok}</span>"
                     if i == t.position else tok)
    return ("…" if lo else "") + "".join(parts) + ("…" if hi < len(t.tokens) else "")


class ScanView(QWidget):
    """Open/Run/Cancel, progress, a summary, top inputs and the effect table."""

    openRequested = Signal()
    saveCsvRequested = Signal()
    runRequested = Signal(str)       # the unit, LAYER:IDX (empty: statistics and effect only)
    cancelRequested = Signal()
    inputChosen = Signal(int)        # an input number, to show in the main view
    unitChanged = Signal(str)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.inputs_label = named(QLabel("no inputs open"), "scanInputsLabel")
        self.open_button = named(QPushButton("Open inputs…"), "scanOpenButton")
        self.unit = named(QLineEdit(""), "scanUnitEdit")
        self.unit.setPlaceholderText("LAYER:UNIT, e.g. conv2:3")
        self.unit.setToolTip("the unit (channel, feature) whose top inputs are shown")
        self.run_button = named(QPushButton("Run scan"), "scanRunButton")
        self.cancel_button = named(QPushButton("Cancel"), "scanCancelButton")
        self.cancel_button.setEnabled(False)
        self.csv_button = named(QPushButton("Save CSV…"), "scanSaveCsvButton")
        self.csv_button.setEnabled(False)
        self.csv_button.setToolTip("one row per input: label, predictions and the metric "
                                   "without and with")
        self.progress = named(QProgressBar(), "scanProgress")
        self.progress.setVisible(False)
        self.eta = named(QLabel(""), "scanEtaLabel")
        self.summary = named(QLabel(""), "scanSummary")
        self.summary.setWordWrap(True)
        self.summary.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.top_list = named(QListWidget(), "scanTopList")
        self.top_list.setViewMode(QListWidget.ViewMode.IconMode)
        self.top_list.setIconSize(QSize(THUMB, THUMB))
        self.top_list.setResizeMode(QListWidget.ResizeMode.Adjust)
        self.top_list.setWrapping(True)
        self.top_list.setSpacing(6)
        self.top_list.setToolTip("double-click an input to open it in the main view")
        self.model = EffectModel()
        self.proxy = QSortFilterProxyModel(self)
        self.proxy.setSourceModel(self.model)
        self.proxy.setSortRole(SORT_ROLE)
        self.table = named(QTableView(), "scanEffectTable")
        self.table.setModel(self.proxy)
        self.table.setSortingEnabled(True)
        self.table.sortByColumn(0, Qt.SortOrder.AscendingOrder)  # input order until asked
        self.table.setSelectionBehavior(QTableView.SelectionBehavior.SelectRows)
        self.table.verticalHeader().setVisible(False)
        self.table.setToolTip("click a header to sort; double-click a row to open the input")
        self.tabs = named(QTabWidget(), "scanTabs")
        self.tabs.addTab(self.top_list, "Top inputs")
        self.tabs.addTab(self.table, "Per input")
        row = QHBoxLayout()
        row.addWidget(self.open_button)
        row.addWidget(self.inputs_label, 1)
        row.addWidget(QLabel("Unit"))
        row.addWidget(self.unit)
        row.addWidget(self.run_button)
        row.addWidget(self.cancel_button)
        row.addWidget(self.csv_button)
        prog = QHBoxLayout()
        prog.addWidget(self.progress, 1)
        prog.addWidget(self.eta)
        lay = QVBoxLayout(self)
        lay.addLayout(row)
        lay.addLayout(prog)
        lay.addWidget(self.summary)
        lay.addWidget(self.tabs, 1)
        self.open_button.clicked.connect(self.openRequested.emit)
        self.run_button.clicked.connect(lambda: self.runRequested.emit(self.unit.text().strip()))
        self.unit.returnPressed.connect(lambda: self.unitChanged.emit(self.unit.text().strip()))
        self.cancel_button.clicked.connect(self.cancelRequested.emit)
        self.csv_button.clicked.connect(self.saveCsvRequested.emit)
        self.table.doubleClicked.connect(
            lambda i: self.inputChosen.emit(self.model.index_of_row(self.proxy.mapToSource(i).row())))
        # a top input is one click from the main view, as a sweep's cell is
        self.top_list.itemClicked.connect(
            lambda item: self.inputChosen.emit(int(item.data(INDEX_ROLE))))

    # -- what the app tells it -------------------------------------------------
    def set_inputs(self, name: str, count: int) -> None:
        self.inputs_label.setText(f"{name}: {count} inputs")

    def set_running(self, total: int | None) -> None:
        running = total is not None
        self.run_button.setEnabled(not running)
        self.open_button.setEnabled(not running)
        self.cancel_button.setEnabled(running)
        self.progress.setVisible(running)
        self.eta.setText("")
        if running:
            self.progress.setRange(0, max(1, total or 1))
            self.progress.setValue(0)

    def set_progress(self, done: int, total: int, eta_s: float) -> None:
        self.progress.setRange(0, max(1, total))
        self.progress.setValue(done)
        self.eta.setText(f"{done}/{total}" + (f", about {eta_s:.0f} s left" if eta_s >= 0 else ""))

    def show_note(self, text: str) -> None:
        self.set_running(None)
        self.summary.setText(text)

    def show_result(self, result: ScanResult, tops: list[tuple[TopInput, Any]] | None,
                    unit_text: str) -> None:
        """The scan's summary and table; ``tops``: the unit's top inputs, each with its
        pixels (an array) or ``None`` for text."""
        self.set_running(None)
        self.summary.setText(summary_text(result))
        self.model.set_result(result)
        self.csv_button.setEnabled(True)
        self.table.resizeColumnsToContents()
        self.show_tops(tops, unit_text)

    def show_tops(self, tops: list[tuple[TopInput, Any]] | None, unit_text: str) -> None:
        self.top_list.clear()
        if not tops:
            return
        text_mode = tops[0][1] is None
        self.top_list.setViewMode(QListWidget.ViewMode.ListMode if text_mode
                                  else QListWidget.ViewMode.IconMode)
        for rank, (t, pixels) in enumerate(tops, 1):
            item = QListWidgetItem()
            item.setData(INDEX_ROLE, t.index)
            item.setToolTip(f"{unit_text}: #{t.index} {t.name}, activation {t.value:.4g} at "
                            f"position {t.position}")
            self.top_list.addItem(item)
            if pixels is not None:
                item.setIcon(QIcon(thumbnail(pixels)))
                item.setText(f"{rank}. #{t.index}\n{t.value:.3g}")
            else:
                label = QLabel(f"<b>{rank}.</b> #{t.index} <i>{t.value:.3g}</i>&nbsp; {snippet(t)}")
                label.setTextFormat(Qt.TextFormat.RichText)
                item.setSizeHint(label.sizeHint())
                self.top_list.setItemWidget(item, label)


def summary_text(r: ScanResult) -> str:
    def pct(v: float | None) -> str:
        return "-" if v is None else f"{100 * v:.1f}%"

    parts = [f"{len(r.rows)} inputs, {r.seconds:.2f} s, metric {r.metric}"]
    if r.accuracy(False) is not None:
        parts.append(f"accuracy {pct(r.accuracy(False))}" +
                     (f" → {pct(r.accuracy(True))} with the interventions" if r.intervened else ""))
    if r.intervened and r.changed_fraction is not None:
        parts.append(f"top prediction changed on {pct(r.changed_fraction)}")
    per_class = r.per_class()
    if per_class and r.intervened:
        worst = sorted(per_class.items(), key=lambda kv: (kv[1]["accuracy_with"] or 0)
                       - (kv[1]["accuracy_without"] or 0))[:3]
        parts.append("most hurt: " + ", ".join(
            f"{k} {pct(v['accuracy_without'])}→{pct(v['accuracy_with'])}" for k, v in worst))
    for path, s in r.layers.items():
        parts.append(f"{path}: mean {s.mean:.3g} std {s.std:.3g} [{s.min:.3g}, {s.max:.3g}]")
    return "  ·  ".join(parts)
