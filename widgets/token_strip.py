"""A strip of the input's tokens to click: which sequence positions an intervention acts on.

The tokens are laid out left to right and wrap onto further rows (a list view
in icon mode), each showing its text with spaces made visible; clicking a token
toggles that position. ``positionsChanged`` carries the sorted positions (empty:
none picked, i.e. every position).
"""

from __future__ import annotations

from PySide6.QtCore import QSize, Qt, Signal
from PySide6.QtWidgets import QAbstractItemView, QListView, QListWidget, QListWidgetItem, QWidget

ROWS_SHOWN = 3   # more rows scroll


def shown_token(token: str) -> str:
    """A token as the strip shows it: spaces as ``·``, control characters escaped."""
    t = token.replace(" ", "·").replace("\n", "\\n").replace("\t", "\\t")
    return t if t else "∅"


class TokenStrip(QListWidget):
    """The current input's tokens, click to pick (object name ``tokenStrip``)."""

    positionsChanged = Signal(list)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("tokenStrip")
        self.setViewMode(QListView.ViewMode.IconMode)
        self.setFlow(QListView.Flow.LeftToRight)
        self.setWrapping(True)
        self.setResizeMode(QListView.ResizeMode.Adjust)
        self.setMovement(QListView.Movement.Static)
        self.setSpacing(1)
        self.setTextElideMode(Qt.TextElideMode.ElideNone)
        self.setUniformItemSizes(False)
        self.setSelectionMode(QAbstractItemView.SelectionMode.MultiSelection)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setStyleSheet("QListWidget#tokenStrip::item { border: 1px solid #bbb; "
                           "padding: 1px 3px; } QListWidget#tokenStrip::item:selected "
                           "{ background: #d9534f; color: white; }")
        self._row = self.fontMetrics().height() + 10
        self.setFixedHeight(self._row + 6)
        self.setToolTip("The input's tokens: click one to act on its position, click again "
                        "to let it go; none picked: every position")
        self.itemSelectionChanged.connect(self._emit)

    def set_tokens(self, tokens: list[str] | None) -> None:
        """Show these tokens (``None``: not a token input); keeps the picks that still fit."""
        picked = self.positions()
        self.blockSignals(True)
        self.clear()
        fm = self.fontMetrics()
        n = len(tokens or [])
        for i, tok in enumerate(tokens or []):
            item = QListWidgetItem(shown_token(tok))
            item.setToolTip(f"position {i} ({i - n} from the end): {tok!r}")
            item.setSizeHint(QSize(fm.horizontalAdvance(shown_token(tok)) + 20, fm.height() + 8))
            self.addItem(item)
        self.blockSignals(False)
        self.set_positions([i for i in picked if i < n])
        self._fit_height()

    def _fit_height(self) -> None:
        """As tall as the wrapped rows of tokens, up to :data:`ROWS_SHOWN` (then it scrolls)."""
        self.doItemsLayout()
        last = self.visualItemRect(self.item(self.count() - 1)) if self.count() else None
        used = (last.bottom() + self.verticalOffset() + 4) if last is not None else self._row
        self.setFixedHeight(min(max(used, self._row), ROWS_SHOWN * self._row) + 6)

    def resizeEvent(self, event) -> None:  # noqa: N802 - Qt override
        super().resizeEvent(event)
        self._fit_height()

    def set_positions(self, positions: list[int]) -> None:
        """Pick exactly these positions (no signal)."""
        want = set(positions)
        self.blockSignals(True)
        for i in range(self.count()):
            self.item(i).setSelected(i in want)
        self.blockSignals(False)
        self.viewport().update()

    def positions(self) -> list[int]:
        return sorted(self.row(it) for it in self.selectedItems())

    def token_rect_center(self, i: int):
        """Where token ``i`` is drawn (viewport coordinates), for a click."""
        return self.visualItemRect(self.item(i)).center()

    def _emit(self) -> None:
        self.positionsChanged.emit(self.positions())
