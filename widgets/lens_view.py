"""The logit-lens grid: layers × positions, each cell the top token that block's
output predicts there, coloured by its probability; hovering a cell lists the
top-k tokens. A chooser shows the run without or with the interventions (a cell
whose top token the interventions changed is framed in bold), and a token field
asks for one token's probability instead of the top token's.

Draws a :class:`~hookscope.core.analyses.logit_lens.LensResult`; holds no state of its
own beyond what it shows, and writes the chosen token through ``tokenChanged``.
"""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import QAbstractTableModel, QModelIndex, QPersistentModelIndex, Qt, Signal
from PySide6.QtGui import QBrush, QColor, QFont
from PySide6.QtWidgets import (QComboBox, QHBoxLayout, QHeaderView, QLabel, QLineEdit,
                               QTableView, QVBoxLayout, QWidget)

from hookscope.core.analyses import LensResult
from hookscope.widgets.named import named

WITHOUT, WITH = "without", "with"
TOP_P, TARGET_P = "top token's p", "p(token)"
_Index = QModelIndex | QPersistentModelIndex


def shown(text: str) -> str:
    """A token as a cell shows it: blanks and controls made visible."""
    return text.replace(" ", "␣").replace("\n", "⏎").replace("\t", "⇥").replace("\r", "\\r") or "∅"


def heat(p: float) -> QColor:
    """White at probability 0 to a deep blue at 1."""
    p = min(max(p, 0.0), 1.0)
    return QColor(int(255 - 200 * p), int(255 - 150 * p), 255)


class LensModel(QAbstractTableModel):
    """Rows are blocks, columns positions."""

    def __init__(self) -> None:
        super().__init__()
        self.lens: LensResult | None = None
        self.which = WITH
        self.by_target = False

    def set_lens(self, lens: LensResult | None, which: str, by_target: bool) -> None:
        self.beginResetModel()
        self.lens, self.which = lens, which
        self.by_target = by_target and lens is not None and lens.target_id is not None
        self.endResetModel()

    def rowCount(self, parent: _Index = QModelIndex()) -> int:  # noqa: N802 - Qt override
        return 0 if self.lens is None or parent.isValid() else len(self.lens.layers)

    def columnCount(self, parent: _Index = QModelIndex()) -> int:  # noqa: N802 - Qt override
        return 0 if self.lens is None or parent.isValid() else len(self.lens.positions)

    def _grids(self) -> tuple[Any, Any, Any, Any]:
        lens = self.lens
        assert lens is not None
        if self.which == WITHOUT:
            return lens.top_without, lens.prob_without, lens.topk_without, lens.target_prob_without
        return lens.top_with, lens.prob_with, lens.topk_with, lens.target_prob_with

    def data(self, index: _Index, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if self.lens is None or not index.isValid():
            return None
        lens, r, c = self.lens, index.row(), index.column()
        top, prob, topk, tprob = self._grids()
        p = tprob[r][c] if self.by_target else prob[r][c]
        if role == Qt.ItemDataRole.DisplayRole:
            return shown(lens.token(top[r][c]))
        if role == Qt.ItemDataRole.BackgroundRole:
            return QBrush(heat(p))
        if role == Qt.ItemDataRole.ForegroundRole:
            return QBrush(QColor("white" if p > 0.6 else "black"))
        if role == Qt.ItemDataRole.FontRole and lens.top_with[r][c] != lens.top_without[r][c]:
            font = QFont()
            font.setBold(True)
            return font
        if role == Qt.ItemDataRole.ToolTipRole:
            return self.tooltip(r, c)
        return None

    def tooltip(self, r: int, c: int) -> str:
        lens = self.lens
        assert lens is not None
        top, _prob, topk, tprob = self._grids()
        lines = [f"{lens.layers[r]}, position {c} ({shown(lens.positions[c])}), {self.which} "
                 "the interventions:"]
        lines += [f"  {shown(lens.token(i))}  {p:.4f}" for i, p in topk[r][c]]
        if lens.target_id is not None:
            lines.append(f"  p({shown(lens.token(lens.target_id))}) = {tprob[r][c]:.4f}")
        if lens.top_with[r][c] != lens.top_without[r][c]:
            lines.append(f"  top without: {shown(lens.token(lens.top_without[r][c]))}, "
                         f"with: {shown(lens.token(lens.top_with[r][c]))}")
        return "\n".join(lines)

    def headerData(self, section: int, orientation: Qt.Orientation,  # noqa: N802 - Qt override
                   role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if self.lens is None or role != Qt.ItemDataRole.DisplayRole:
            return None
        if orientation == Qt.Orientation.Horizontal:
            return shown(self.lens.positions[section])
        return self.lens.layers[section]


class LensView(QWidget):
    """The grid with its chooser (without/with) and token field."""

    tokenChanged = Signal(str)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("lensView")
        self.model = LensModel()
        self.table = named(QTableView(), "lensTable")
        self.table.setModel(self.model)
        self.table.setMouseTracking(True)
        self.table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        self.table.horizontalHeader().setMinimumSectionSize(30)
        self.table.verticalHeader().setDefaultSectionSize(26)
        self.colour = named(QComboBox(), "lensColour")
        self.colour.addItems([TOP_P, TARGET_P])
        self.colour.setToolTip("what the colour of a cell shows")
        self.colour.currentTextChanged.connect(lambda _t: self._redraw())
        self.which = named(QComboBox(), "lensWhich")
        self.which.addItems([WITH, WITHOUT])
        self.which.setToolTip("the run whose blocks the grid decodes")
        self.which.currentTextChanged.connect(lambda _t: self._redraw())
        self.token = named(QLineEdit(), "lensToken")
        self.token.setPlaceholderText("token (colour by its probability)")
        self.token.editingFinished.connect(lambda: self.tokenChanged.emit(self.token.text()))
        self.head = named(QLineEdit(), "lensHead")
        self.head.setPlaceholderText("NORM,UNEMBED (when not recognised)")
        self.head.setToolTip("the model's final norm and unembedding, e.g. ln_f,lm_head; "
                             "empty: recognised (GPT-2, Llama family, demo:lm)")
        self.head.editingFinished.connect(lambda: self.tokenChanged.emit(self.token.text()))
        for field in (self.token, self.head):   # wide enough to read what one types
            field.setMinimumWidth(field.fontMetrics().horizontalAdvance("ln_f,lm_head") + 24)
        self.note = named(QLabel(), "lensNote")
        self.note.setWordWrap(True)
        # The last position (where the prompt ends: what the model predicts next) is the
        # one that matters: the grid shows it, scrolled to the right, and stays there as
        # the dock is resized, until the person scrolls away.
        self._at_end = True
        bar_h = self.table.horizontalScrollBar()
        bar_h.rangeChanged.connect(lambda _lo, hi: bar_h.setValue(hi) if self._at_end else None)
        bar_h.valueChanged.connect(lambda v: setattr(self, "_at_end", v >= bar_h.maximum()))
        bar = QHBoxLayout()
        bar.addWidget(QLabel("run"))
        bar.addWidget(self.which)
        bar.addWidget(QLabel("colour"))
        bar.addWidget(self.colour)
        bar.addWidget(self.token, 1)
        bar.addWidget(self.head, 1)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(2, 2, 2, 2)
        lay.addLayout(bar)
        lay.addWidget(self.note)
        lay.addWidget(self.table, 1)
        self._lens: LensResult | None = None
        self.show_note("Run a causal language model to see what each block predicts.")

    def wanted_height(self) -> int:
        """The height that shows every row, its controls and the note."""
        rows = self.model.rowCount()
        table = (self.table.horizontalHeader().height() + 4
                 + rows * self.table.verticalHeader().defaultSectionSize()
                 + self.table.horizontalScrollBar().sizeHint().height())
        return table + self.token.sizeHint().height() + self.note.sizeHint().height() + 16

    def show_note(self, text: str) -> None:
        self.note.setText(text)
        self.note.setVisible(bool(text))

    def show_lens(self, lens: LensResult | None) -> None:
        self._lens = lens
        self._at_end = True
        self._redraw()
        bar = self.table.horizontalScrollBar()
        bar.setValue(bar.maximum())

    def _redraw(self) -> None:
        lens = self._lens
        by_target = (lens is not None and lens.target_id is not None
                     and self.colour.currentText() == TARGET_P)
        self.model.set_lens(lens, self.which.currentText(), by_target)
        if lens is not None:
            changed = sum(a != b for ra, rb in zip(lens.top_without, lens.top_with)
                          for a, b in zip(ra, rb))
            colour = (f"p({shown(lens.token(lens.target_id))})"
                      if self.model.by_target and lens.target_id is not None
                      else "the top token's probability")
            self.show_note(f"colour: {colour}; bold: {changed} cell{'s' if changed != 1 else ''} "
                           "whose top token the interventions changed. Hover for the top tokens.")
