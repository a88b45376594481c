"""The window's small furniture, kept out of main_window.py: remembered geometry and
dock layout (QSettings), files dropped on the window, the recent-models menu and
the About box. Each takes data (a widget, a menu, a callable), never the window class.
"""

from __future__ import annotations

import importlib.metadata
from typing import Callable

import torch
from PySide6.QtCore import QByteArray, QMimeData, QSettings
from PySide6.QtWidgets import QMainWindow, QMenu, QMessageBox, QWidget

from hookscope.core.session import SUFFIX

from .recent import RecentModels

GEOMETRY_KEY = "window/geometry"
STATE_KEY = "window/state"
# The dock layout's version: a layout saved before the analysis docks were tabs (each
# side by side in one strip) is not put back; the window starts from its own.
STATE_VERSION = 1


def settings() -> QSettings:
    """Hookscope's settings (tests point them at a temporary folder, see tests/conftest.py)."""
    return QSettings("Hookscope", "Hookscope")


def restore_layout(win: QMainWindow, store: QSettings | None = None) -> bool:
    """Put back the geometry and dock layout saved at the last close; whether there was one."""
    store = store or settings()
    geo, state = store.value(GEOMETRY_KEY), store.value(STATE_KEY)
    ok = isinstance(geo, QByteArray) and win.restoreGeometry(geo)
    if isinstance(state, QByteArray):
        ok = win.restoreState(state, STATE_VERSION) and ok
    return bool(ok)


def save_layout(win: QMainWindow, store: QSettings | None = None) -> None:
    store = store or settings()
    store.setValue(GEOMETRY_KEY, win.saveGeometry())
    store.setValue(STATE_KEY, win.saveState(STATE_VERSION))
    store.sync()


def dropped_session(mime: QMimeData) -> str | None:
    """The one local ``*.hookscope.json`` file in a drag, if that is what it carries."""
    if not mime.hasUrls():
        return None
    files = [u.toLocalFile() for u in mime.urls() if u.isLocalFile()]
    return files[0] if len(files) == 1 and files[0].endswith((SUFFIX, ".json")) else None


def fill_recent_menu(menu: QMenu, recent: RecentModels, open_model: Callable[[str, str | None], object]) -> None:
    menu.clear()
    items = recent.items()
    for spec, weights in items:
        label = spec if not weights else f"{spec}  (weights {weights})"
        act = menu.addAction(label)
        act.triggered.connect(lambda _=False, s=spec, w=weights: open_model(s, w))
    if not items:
        menu.addAction("(none yet)").setEnabled(False)
    else:
        menu.addSeparator()
        menu.addAction("Clear list").triggered.connect(recent.clear)


def app_version() -> str:
    try:
        return importlib.metadata.version("hookscope")
    except importlib.metadata.PackageNotFoundError:  # running from a bare checkout
        return "(not installed)"


def show_about(parent: QWidget) -> None:
    QMessageBox.about(parent, "About Hookscope",
                      f"<b>Hookscope {app_version()}</b> — an activation explorer for "
                      f"PyTorch (torch {torch.__version__}).<br>"
                      "Capture layer outputs, intervene on them (clamp, scale, zero, noise, ...), "
                      "and compare the model's output without and with, live.")
