"""Answering the window's file dialog as a person does: its folder opened, the file's name
typed, Save or Open clicked."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Qt, QTimer
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QApplication, QDialogButtonBox, QFileDialog, QLineEdit

from .keys import retype


def answer_file_dialog(path: Path, button: QDialogButtonBox.StandardButton,
                       answered: list | None = None) -> None:
    """Once the window's file dialog (``"fileDialog"``) is up: ``path``'s folder opened, its
    name typed, ``button`` (Save, Open) clicked; ``answered`` gets the dialog's title. Call it
    just before the click that opens the dialog (which waits in its own event loop)."""
    def answer() -> None:
        dlg = QApplication.activeModalWidget()
        if not isinstance(dlg, QFileDialog) or dlg.objectName() != "fileDialog":
            QTimer.singleShot(50, answer)   # not up yet
            return
        # the folder opened (a whole path typed would open the name field's completer,
        # which takes the keys a test sends next), then the name typed
        dlg.setDirectory(str(path.parent))
        retype(dlg.findChild(QLineEdit, "fileNameEdit"), path.name)
        if answered is not None:
            answered.append(dlg.windowTitle())
        QTest.mouseClick(dlg.findChild(QDialogButtonBox).button(button), Qt.MouseButton.LeftButton)

    QTimer.singleShot(0, answer)
