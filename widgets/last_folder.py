"""The folder a file dialog opened last, remembered across sessions (QSettings).

Every dialog of the app that picks a file starts where the previous one of
its kind ended, instead of the current working folder. Tests point QSettings
at a temporary folder (tests/conftest.py), so they never touch a user's.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QSettings

_PREFIX = "lastFolder/"


def _settings() -> QSettings:
    return QSettings("Hookscope", "Hookscope")


def last_folder(kind: str) -> str:
    """The folder the last ``kind`` dialog ("model", "weights", "export") used, or ``""``."""
    value = _settings().value(_PREFIX + kind, "")
    folder = value if isinstance(value, str) else ""
    return folder if folder and Path(folder).is_dir() else ""


def remember(kind: str, path: str) -> None:
    """Note the folder of a file the user picked in a ``kind`` dialog."""
    if path:
        _settings().setValue(_PREFIX + kind, str(Path(path).expanduser().resolve().parent))


def pick_file(parent, kind: str, caption: str, filters: str, save: bool = False,
              file_name: str = "") -> str:
    """Ask for a file (to open, or with ``save`` to write) starting in the last
    ``kind`` folder; remember the folder of the answer. ``""`` if cancelled.

    A QFileDialog object rather than the static helpers, so it has an object
    name (``fileDialog``) that scripts and tests can find and drive.
    """
    from PySide6.QtWidgets import QFileDialog

    dlg = QFileDialog(parent, caption, last_folder(kind), filters)
    dlg.setObjectName("fileDialog")
    if save:
        dlg.setAcceptMode(QFileDialog.AcceptMode.AcceptSave)
        dlg.setFileMode(QFileDialog.FileMode.AnyFile)
        suffix = Path(file_name).suffix.lstrip(".")
        if suffix:
            dlg.setDefaultSuffix(suffix)
    else:
        dlg.setFileMode(QFileDialog.FileMode.ExistingFile)
    if file_name:
        dlg.selectFile(file_name)
    try:
        if not dlg.exec():
            return ""
        files = dlg.selectedFiles()
    finally:
        dlg.deleteLater()
    path = files[0] if files else ""
    remember(kind, path)
    return path
