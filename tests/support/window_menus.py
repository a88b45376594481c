"""Opening the window's menus as a person does: a click on a menu's title in the menu bar
and one on its action, and the layer tree's context menu with a right click on a layer."""

from __future__ import annotations

from PySide6.QtCore import QPoint, Qt
from PySide6.QtGui import QAction, QContextMenuEvent
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QApplication, QMenu

from hookscope.widgets.layer_tree_model import COL_LAYER


def click_menu_action(qtbot, win, menu_text: str, action, submenu: str | None = None) -> None:
    """A click on the menu bar's ``menu_text`` (``"&File"``), then (``submenu``: on that
    entry first, ``"Open &recent"``) on ``action``: a QAction, its object name, or the text of an entry the menu
    makes as it opens (the recent files)."""
    bar = win.menuBar()
    title = [a for a in bar.actions() if a.text() == menu_text][0]
    menu = title.menu()
    win.activateWindow()
    QTest.mouseClick(bar, Qt.MouseButton.LeftButton, pos=bar.actionGeometry(title).center())
    qtbot.waitUntil(menu.isVisible)
    if submenu is not None:
        entry = [a for a in menu.actions() if a.text() == submenu][0]
        QTest.mouseClick(menu, Qt.MouseButton.LeftButton, pos=menu.actionGeometry(entry).center())
        menu = entry.menu()
        qtbot.waitUntil(menu.isVisible)
    if isinstance(action, str):  # an object name, or the text of an entry made as it opens
        found = win.findChild(QAction, action)
        action = found if found is not None else [a for a in menu.actions()
                                                  if a.text() == action][0]
    QTest.mouseClick(menu, Qt.MouseButton.LeftButton, pos=menu.actionGeometry(action).center())


def click_view_action(qtbot, win, action) -> None:
    """A click on View, then on ``action`` (a QAction or its object name)."""
    click_menu_action(qtbot, win, "&View", action)


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
