"""The model's output read by what it means, as a table beside the before/after plot.

:class:`OutputMeaningView` shows :func:`hookscope.core.views.outputs.describe_outputs`:
the top-k classes with labels and probabilities without and with the plan,
or, for a language model, each position's input token and top next tokens
(rows where the top token changed are marked), or detections per image, or
each output leaf by name with its largest change. It computes nothing of its
own: the numbers are the core's.
"""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtGui import QBrush, QColor, QImage, QPixmap
from PySide6.QtWidgets import (QHBoxLayout, QHeaderView, QLabel, QTableWidget, QTableWidgetItem,
                               QVBoxLayout, QWidget)

from hookscope.core.base import CLASSES, DETECTIONS, TOKENS

from .detection_view import DetectionView

CHANGED = QColor(255, 235, 200)  # light orange: this row's top answer changed


TOKEN_RANKS = 3   # next tokens shown per position, without and with: one column each


def _tops(top: list[dict[str, Any]], n: int = TOKEN_RANKS) -> str:
    return ", ".join(f"{t['label']} {t['prob']:.3f}" for t in top[:n])


def _token_cells(top: list[dict[str, Any]]) -> list[str]:
    """One cell per rank (token, probability): the runners-up are never elided away."""
    return [f"{t['label']} {t['prob']:.3f}" for t in top[:TOKEN_RANKS]] + \
        [""] * max(0, TOKEN_RANKS - len(top))


def token_row_tip(p: dict[str, Any]) -> str:
    """The whole row of one position, for the tooltip of each of its cells."""
    token = "" if p["input"] is None else f" {p['input']!r}"
    return (f"position {p['position']}{token}\nwithout: {_tops(p['top_without'], 10)}"
            f"\nwith: {_tops(p['top_with'], 10)}")


def rows_for(desc: dict[str, Any]) -> tuple[str, list[str], list[tuple[list[str], bool]]]:
    """(title, headers, [(cells, changed)]) of a description: what the table shows."""
    kind = desc.get("kind")
    if kind == CLASSES:
        rows = []
        for r, row in enumerate(desc["rows"]):
            for i in range(max(len(row["top_without"]), len(row["top_with"]))):
                a = row["top_without"][i] if i < len(row["top_without"]) else None
                b = row["top_with"][i] if i < len(row["top_with"]) else None
                rows.append(([str(r) if i == 0 else "", str(i + 1),
                              f"{a['label']}  {a['prob']:.3f}" if a else "",
                              f"{b['label']}  {b['prob']:.3f}" if b else ""],
                             i == 0 and row["top_changed"]))
        return ("Top classes", ["row", "rank", "without", "with"], rows)
    if kind == TOKENS:
        # rank by rank, without beside with: a narrow dock shows the top pair first
        pairs = lambda p: [c for pair in zip(_token_cells(p["top_without"]),
                                             _token_cells(p["top_with"])) for c in pair]
        rows = [([str(p["position"]), "" if p["input"] is None else str(p["input"])] + pairs(p),
                 p["top_changed"]) for p in desc["positions"]]
        n = len(desc["changed_positions"])
        title = (f"{desc['predicts'].capitalize()}: the top token changed at {n} of "
                 f"{desc['positions_total']} positions")
        ranks = [h for i in range(TOKEN_RANKS) for h in (f"#{i + 1} without", f"#{i + 1} with")]
        return (title, ["pos", "token", *ranks], rows)
    if kind == DETECTIONS:
        rows = []
        for i, img in enumerate(desc["images"]):
            for j in range(max(len(img["top_without"]), len(img["top_with"]), 1)):
                a = img["top_without"][j] if j < len(img["top_without"]) else None
                b = img["top_with"][j] if j < len(img["top_with"]) else None
                # an image with no box says so in its first row, not with a blank column
                cell = lambda d, side: (f"{d['label']} {d['score']:.2f} ["
                                        + ", ".join(f"{v:g}" for v in d["box"]) + "]") if d else (
                    "no boxes" if j == 0 and not img[side] else "")
                rows.append(([str(i) if j == 0 else "", str(j + 1) if a or b else "",
                              cell(a, "top_without"), cell(b, "top_with")], False))
        return ("Detections (highest scores)", ["image", "rank", "without", "with"], rows)
    rows = [([leaf["name"], "×".join(map(str, leaf["shape"] or [])),
              str(leaf.get("changed_values", "")), str(leaf.get("max_abs_diff", ""))],
             bool(leaf.get("changed_values")))
            for leaf in desc.get("leaves", [])]
    return ("Output leaves", ["leaf", "shape", "values changed", "max |Δ|"], rows)


class OutputMeaningView(QWidget):
    """Table of the output by meaning (object name ``outputMeaning``)."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("outputMeaning")
        self.title = QLabel(self)
        self.title.setObjectName("outputMeaningTitle")
        self.notes = QLabel(self)
        self.notes.setObjectName("outputMeaningNotes")
        self.notes.setWordWrap(True)
        self.notes.setStyleSheet("color: #a15c00;")
        self._headers: list[str] | None = None   # the columns shown (None: none yet)
        self.table = QTableWidget(0, 4, self)
        self.table.setObjectName("outputMeaningTable")
        self.table.verticalHeader().hide()
        self.table.setWordWrap(False)  # one line per position; scroll sideways for more
        self.table.verticalHeader().setDefaultSectionSize(self.fontMetrics().height() + 6)
        self.table.setEditTriggers(QTableWidget.EditTrigger.NoEditTriggers)
        self.table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        self.table.setTextElideMode(Qt.TextElideMode.ElideMiddle)  # keep a class's probability in view
        self.table.horizontalHeader().setStretchLastSection(False)
        # the input the numbers belong to: the picture a classifier saw
        self.thumbnail = QLabel(self)
        self.thumbnail.setObjectName("inputThumbnail")
        self.thumbnail.setToolTip("The input image (values stretched to their own range)")
        self.thumbnail.hide()
        # a detector's boxes drawn on its input, without and with (shown for detections only)
        self.detections = DetectionView(self)
        self.detections.hide()
        layout = self._layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.title)
        layout.addWidget(self.notes)
        row = QHBoxLayout()
        row.addWidget(self.thumbnail, 0, Qt.AlignmentFlag.AlignTop)
        row.addWidget(self.table, 1)
        layout.addWidget(self.detections, 3)  # above the table: the picture needs the width
        layout.addLayout(row, 2)
        self.notes.hide()

    def show_input_image(self, image: Any) -> None:
        """An ``H x W x C`` uint8 array as a thumbnail (``None`` hides it)."""
        if image is None:
            self.thumbnail.hide()
            return
        h, w, c = image.shape
        fmt = QImage.Format.Format_Grayscale8 if c == 1 else QImage.Format.Format_RGB888
        self._image_bytes = image.tobytes()  # QImage does not own the buffer
        qimg = QImage(self._image_bytes, w, h, w * c, fmt)
        side = 96
        self.thumbnail.setPixmap(QPixmap.fromImage(qimg).scaled(
            side, side, Qt.AspectRatioMode.KeepAspectRatio,
            Qt.TransformationMode.FastTransformation if max(h, w) < side
            else Qt.TransformationMode.SmoothTransformation))
        self.thumbnail.show()

    def show_detections(self, image: Any, without: list[dict[str, Any]],
                        with_: list[dict[str, Any]], size: tuple[int, int] | None = None) -> None:
        """The boxes of :func:`hookscope.core.views.detections.image_boxes` on ``image`` (``H x W x C``
        uint8, or None with ``size`` = the input's (width, height)); replaces the thumbnail."""
        self.detections.show_detections(image, without, with_, size)
        self.detections.show()
        self.thumbnail.hide()

    def show_description(self, desc: dict[str, Any]) -> None:
        title, headers, rows = rows_for(desc)
        if desc.get("kind") != DETECTIONS:
            self.detections.hide()
        self.title.setText(title)
        notes = desc.get("notes") or []
        self.notes.setText("\n".join(notes))
        self.notes.setVisible(bool(notes))
        new_kind = headers != self._headers
        if new_kind:
            self._headers = list(headers)
            self.table.clearContents()
            self.table.setColumnCount(len(headers))
            self.table.setHorizontalHeaderLabels(headers)
            self._size_columns()
        if self.table.rowCount() != len(rows):
            self.table.setRowCount(len(rows))
        # The cells are updated in place: a Live drag sends the table again with
        # every result, and a table of new items is laid out and measured anew.
        tips = ([token_row_tip(p) for p in desc["positions"]] if desc.get("kind") == TOKENS
                else [None] * len(rows))
        for r, (cells, changed) in enumerate(rows):
            for c in range(len(headers)):
                self._set_cell(r, c, cells[c] if c < len(cells) else "", changed, tips[r])
        self._hide_sample_column(desc, rows)
        self._fit_height(desc.get("kind") == DETECTIONS)
        if desc.get("kind") == TOKENS and rows:
            self.table.scrollToBottom()  # where the prompt ends: the next token

    def _set_cell(self, r: int, c: int, text: str, changed: bool, tip: str | None = None) -> None:
        item = self.table.item(r, c)
        if item is None:
            item = QTableWidgetItem()
            item.setFlags(Qt.ItemFlag.ItemIsEnabled | Qt.ItemFlag.ItemIsSelectable)
            self.table.setItem(r, c, item)
        if item.text() != text:
            item.setText(text)
        tip = text if tip is None else tip  # a narrow dock elides; the whole row a hover away
        if item.toolTip() != tip:
            item.setToolTip(tip)
        if (item.background().style() != Qt.BrushStyle.NoBrush) != changed:
            item.setBackground(QBrush(CHANGED) if changed else QBrush())

    def _fit_height(self, detections: bool) -> None:
        """No taller than the rows need: a short table leaves the height to the plot
        above it instead of an empty white band (a long one scrolls)."""
        if detections:   # the picture above the table takes what it can use
            self.setMaximumHeight(16777215)
            return
        table = self.table
        rows = sum(table.rowHeight(r) for r in range(table.rowCount()))
        bar = table.horizontalScrollBar().sizeHint().height()
        need = rows + table.horizontalHeader().sizeHint().height() + 2 * table.frameWidth() + bar
        extra = self.title.sizeHint().height() + (self.notes.sizeHint().height()
                                                  if not self.notes.isHidden() else 0)
        self.setMaximumHeight(need + extra + 2 * self._layout.spacing() + 4)

    def _size_columns(self) -> None:
        """Short columns to their contents, ``without`` and ``with`` share the rest,
        so both outputs are side by side in a narrow dock (elided, full text in the
        tooltip). Set once per kind of table: the modes do not change with the rows."""
        header = self.table.horizontalHeader()
        n = self.table.columnCount()
        for c in range(n):
            mode = (QHeaderView.ResizeMode.Stretch if c >= n - 2 and n == 4
                    else QHeaderView.ResizeMode.ResizeToContents)
            header.setSectionResizeMode(c, mode)

    def _hide_sample_column(self, desc: dict[str, Any], rows: list) -> None:
        """The sample column only when the batch has more than one."""
        one_sample = desc.get("kind") in (CLASSES, DETECTIONS) and sum(bool(r[0][0]) for r in rows) <= 1
        self.table.setColumnHidden(0, one_sample)

    def cell_texts(self) -> list[list[str]]:
        """What the table shows, row by row (for tests and copy)."""
        return [[self._cell_text(r, c) for c in range(self.table.columnCount())]
                for r in range(self.table.rowCount())]

    def _cell_text(self, row: int, column: int) -> str:
        item = self.table.item(row, column)
        assert item is not None  # show_description fills every cell
        return item.text()
