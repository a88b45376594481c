"""A grid of an attention module's heads to click: which heads an intervention acts on.

One checkable button per head (``head_<i>``), at most eight to a row;
``headsChanged`` carries the sorted picked heads (empty: every head). With no
count (the layer is not an attention module Hookscope can split) the grid says so.
"""

from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QGridLayout, QLabel, QToolButton, QWidget

PER_ROW = 8


class HeadGrid(QWidget):
    """Toggle buttons for ``n`` heads (object name ``headGrid``)."""

    headsChanged = Signal(list)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("headGrid")
        self.setStyleSheet("QToolButton:checked { background: #d9534f; color: white; "
                           "border: 1px solid #a94442; }")
        self._lay = QGridLayout(self)
        self._lay.setContentsMargins(0, 0, 0, 0)
        self._lay.setSpacing(2)
        self._none = QLabel()
        self._none.setObjectName("headGridNone")
        self._none.setWordWrap(True)
        self._lay.addWidget(self._none, 0, 0, 1, PER_ROW)
        self.buttons: list[QToolButton] = []
        self.set_count(None)

    def set_count(self, n: int | None, why: str = "") -> None:
        """Show ``n`` head buttons (``None``: none, with ``why`` as the reason)."""
        if n is not None and n == len(self.buttons):
            return
        for b in self.buttons:
            self._lay.removeWidget(b)
            b.deleteLater()
        self.buttons = []
        self._none.setVisible(not n)
        self._none.setText(why or "not an attention module: no heads to pick")
        for i in range(n or 0):
            b = QToolButton()
            b.setObjectName(f"head_{i}")
            b.setCheckable(True)
            b.setText(str(i))
            b.setToolTip(f"head {i}: click to act on its output (before the output projection)")
            b.setMinimumWidth(28)
            b.toggled.connect(self._emit)
            self._lay.addWidget(b, 1 + i // PER_ROW, i % PER_ROW)
            self.buttons.append(b)

    def set_heads(self, heads: list[int]) -> None:
        """Check exactly these heads (no signal)."""
        want = set(heads)
        for i, b in enumerate(self.buttons):
            b.blockSignals(True)
            b.setChecked(i in want)
            b.blockSignals(False)

    def heads(self) -> list[int]:
        return [i for i, b in enumerate(self.buttons) if b.isChecked()]

    def _emit(self, _on: bool) -> None:
        self.headsChanged.emit(self.heads())
