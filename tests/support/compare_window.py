"""Driving the window's model comparison as a person does: File → Compare with… filled in
and OK clicked, a point of the Divergence dock clicked, and the wait for that layer's panel
to show model A against model B (demo:cnn's leaf layers, in execution order: ROWS)."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QAction
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QApplication, QDialogButtonBox

from tests.support.keys import choose, retype

ROWS = ["conv1", "bn1", "relu1", "pool1", "conv2", "bn2", "relu2", "pool2", "flatten", "fc"]


def compare_with(win, qtbot, weights=None, dtype=None):
    win.findChild(QAction, "actionCompareWith").trigger()   # as File → Compare with…
    qtbot.waitUntil(lambda: QApplication.activeModalWidget() is not None
                    and QApplication.activeModalWidget().objectName() == "compareDialog",
                    timeout=5000)
    dlg = QApplication.activeModalWidget()
    if weights:
        retype(dlg.weights, weights)
    if dtype:
        choose(dlg.dtype, dtype)
    QTest.mouseClick(dlg.buttons.button(QDialogButtonBox.StandardButton.Ok),
                     Qt.MouseButton.LeftButton)
    tool = win.compare_tool
    qtbot.waitUntil(lambda: tool.result is not None and win.is_idle(), timeout=60_000)
    return tool


def click_point(win, qtbot, path):
    view = win.compare_tool.view
    qtbot.waitUntil(lambda: view.graphics.isVisible() and view.graphics.width() > 100)
    pos = view.graphics.mapFromScene(view.point_center(ROWS.index(path)))
    with qtbot.waitSignal(view.layerChosen):
        QTest.mouseClick(view.graphics.viewport(), Qt.MouseButton.LeftButton, pos=pos)
    return wait_pair(win, qtbot, path)


def wait_pair(win, qtbot, path):
    qtbot.waitUntil(lambda: win.is_idle() and (path, 0) in win.panel.panels()
                    and win.panel.panels()[(path, 0)].record is not None
                    and win.panel.panels()[(path, 0)].record.pair is not None, timeout=60_000)
    return win.panel.panels()[(path, 0)]
