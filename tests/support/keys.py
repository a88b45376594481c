"""Typing into the window's fields as a person does: select all and type over, and pick a
combo box's entry with the keyboard."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtTest import QTest


def retype(field, text: str) -> None:
    """Ctrl+A in ``field``, then ``text`` typed over it (Delete where ``text`` is empty)."""
    field.setFocus()
    QTest.keyClick(field, Qt.Key.Key_A, Qt.KeyboardModifier.ControlModifier)
    if text:
        QTest.keyClicks(field, text)
    else:
        QTest.keyClick(field, Qt.Key.Key_Delete)


def choose(combo, text: str) -> None:
    """Pick ``text`` in a combo with the keyboard (Home, then Down until it shows)."""
    combo.setFocus()
    QTest.keyClick(combo, Qt.Key.Key_Home)
    for _ in range(combo.count()):
        if combo.currentText() == text:
            return
        QTest.keyClick(combo, Qt.Key.Key_Down)
    assert combo.currentText() == text
