"""A layout that lays its widgets out left to right and wraps onto further rows.

Each widget keeps at least its minimum width (its size hint's when it has none);
a row's spare width is shared among that row's widgets, so a wide parent shows them on
one line and a narrow one stacks them, never on top of each other. Its height depends on
its width (:meth:`heightForWidth`).
"""

from __future__ import annotations

from PySide6.QtCore import QPoint, QRect, QSize
from PySide6.QtWidgets import QLayout, QLayoutItem, QWidget


class FlowLayout(QLayout):
    """Items in rows of the parent's width, wrapping when the next one doesn't fit."""

    def __init__(self, parent: QWidget | None = None, spacing: int = 3) -> None:
        super().__init__(parent)
        self._items: list[QLayoutItem] = []
        self._gap = spacing

    # -- QLayout's interface -------------------------------------------------------------
    def addItem(self, item: QLayoutItem) -> None:  # noqa: N802 - Qt override
        self._items.append(item)

    def count(self) -> int:
        return len(self._items)

    def itemAt(self, i: int) -> QLayoutItem | None:  # noqa: N802 - Qt override
        return self._items[i] if 0 <= i < len(self._items) else None

    def takeAt(self, i: int) -> QLayoutItem | None:  # noqa: N802 - Qt override
        return self._items.pop(i) if 0 <= i < len(self._items) else None

    def hasHeightForWidth(self) -> bool:  # noqa: N802 - Qt override
        return True

    def heightForWidth(self, width: int) -> int:  # noqa: N802 - Qt override
        return self._place(QRect(0, 0, width, 0), move=False)

    def setGeometry(self, rect: QRect) -> None:  # noqa: N802 - Qt override
        super().setGeometry(rect)
        self._place(rect, move=True)

    def sizeHint(self) -> QSize:  # noqa: N802 - Qt override
        """One row of every item at its least width."""
        shown = self._shown()
        m = self.contentsMargins()
        width = sum(self._least(i).width() for i in shown) + self._gap * max(0, len(shown) - 1)
        height = max((self._least(i).height() for i in shown), default=0)
        return QSize(width + m.left() + m.right(), height + m.top() + m.bottom())

    def minimumSize(self) -> QSize:  # noqa: N802 - Qt override
        """As wide as the widest item: every item still fits whole on a row of its own."""
        m = self.contentsMargins()
        width = max((self._least(i).width() for i in self._shown()), default=0)
        return QSize(width + m.left() + m.right(), self.heightForWidth(width) if width else 0)

    # -- placing --------------------------------------------------------------------------
    def _shown(self) -> list[QLayoutItem]:
        return [i for i in self._items if not i.isEmpty()]

    @staticmethod
    def _least(item: QLayoutItem) -> QSize:
        """The room an item needs: its minimum width, its hinted height."""
        least, hint = item.minimumSize(), item.sizeHint()
        return QSize(least.width() or hint.width(), max(least.height(), hint.height()))

    def rows(self, width: int) -> list[list[QLayoutItem]]:
        """The shown items, row by row, for a layout ``width`` px wide (margins included)."""
        m = self.contentsMargins()
        room = max(1, width - m.left() - m.right())
        rows: list[list[QLayoutItem]] = [[]]
        used = 0
        for item in self._shown():
            w = min(self._least(item).width(), room)
            if rows[-1] and used + self._gap + w > room:
                rows.append([])
                used = 0
            used += (self._gap if rows[-1] else 0) + w
            rows[-1].append(item)
        return [r for r in rows if r]

    def _place(self, rect: QRect, move: bool) -> int:
        """Lay the items out in ``rect`` (only measured unless ``move``); returns the height."""
        m = self.contentsMargins()
        room = max(1, rect.width() - m.left() - m.right())
        y = rect.y() + m.top()
        for row in self.rows(rect.width()):
            widths = [min(self._least(i).width(), room) for i in row]
            spare = room - sum(widths) - self._gap * (len(row) - 1)
            height = max(self._least(i).height() for i in row)
            x = rect.x() + m.left()
            for n, (item, w) in enumerate(zip(row, widths)):
                w += spare // len(row) + (1 if n < spare % len(row) else 0) if spare > 0 else 0
                if move:
                    item.setGeometry(QRect(QPoint(x, y), QSize(w, height)))
                x += w + self._gap
            y += height + self._gap
        return y - self._gap - rect.y() + m.bottom() if self._shown() else m.top() + m.bottom()
