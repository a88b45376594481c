"""Opening the window's menus as a person does: the View menu with Alt+V and a click on
one of its actions, and the layer tree's context menu with a right click on a layer."""

from __future__ import annotations

from PySide6.QtCore import QPoint, Qt
from PySide6.QtGui import QAction, QContextMenuEvent
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QApplication, QMenu

from hookscope.widgets.layer_tree_model import COL_LAYER


def click_view_action(qtbot, win, action_name: str) -> None:
    """Alt+V, then a click on the View menu's action named ``action_name``."""
    view_menu = [a.menu() for a in win.menuBar().actions() if a.text() == "&View"][0]
    win.activateWindow()
    QTest.keyClick(win, Qt.Key.Key_V, Qt.KeyboardModifier.AltModifier)
    qtbot.waitUntil(view_menu.isVisible)
    toggle = win.findChild(QAction, action_name)
    QTest.mouseClick(view_menu, Qt.MouseButton.LeftButton,
                     pos=view_menu.actionGeometry(toggle).center())


def tree_context_menu(qtbot, win, path: str) -> QMenu:
    """The layer tree's context menu on ``path``, opened by a right click on its name."""
    w = win.tree
    w.select_path(path)
    rect = w.view.visualRect(w.proxy.mapFromSource(w.model.index_for_path(path, COL_LAYER)))
    pos = QPoint(rect.left() + 20, rect.center().y())
    QTest.mouseClick(w.view.viewport(), Qt.MouseButton.RightButton, pos=pos)
    QApplication.sendEvent(w.view.viewport(), QContextMenuEvent(
        QContextMenuEvent.Reason.Mouse, pos, w.view.viewport().mapToGlobal(pos)))
    qtbot.waitUntil(lambda: w.menu is not None and w.menu.isVisible())
    return w.menu
