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


def start_path(kind: str, file_name: str = "") -> str:
    """Where a ``kind`` dialog should open: the last folder, with ``file_name`` in it."""
    folder = last_folder(kind)
    if not folder:
        return file_name
    return str(Path(folder) / file_name) if file_name else folder


def remember(kind: str, path: str) -> None:
    """Note the folder of a file the user picked in a ``kind`` dialog."""
    if path:
        _settings().setValue(_PREFIX + kind, str(Path(path).expanduser().resolve().parent))
