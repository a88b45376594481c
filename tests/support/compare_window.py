"""Driving the window's model comparison as a person does: File → Compare with… filled in
and OK clicked, a point of the Divergence dock clicked, and the wait for that layer's panel
to show model A against model B (demo:cnn's leaf layers, in execution order: ROWS)."""

from __future__ import annotations

import copy

import torch
from PySide6.QtCore import Qt
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QApplication, QDialogButtonBox

from hookscope.core import load_model
from tests.support.keys import choose, retype
from tests.support.window_menus import click_menu_action

ROWS = ["conv1", "bn1", "relu1", "pool1", "conv2", "bn2", "relu2", "pool2", "flatten", "fc"]


def nudged_cnn(tmp_path):
    """demo:cnn loaded, and a weights file of it with conv2's weights nudged (seeded):
    ``(loaded, path)``."""
    lm = load_model("demo:cnn")
    state = {k: v.clone() for k, v in lm.module.state_dict().items()}
    g = torch.Generator().manual_seed(1)
    state["conv2.weight"] += 1e-2 * torch.randn(state["conv2.weight"].shape, generator=g)
    path = tmp_path / "nudged.pt"
    torch.save(state, path)
    return lm, path


def nudged_models(tmp_path):
    """Model A (demo:cnn, eval mode) and model B (a copy with conv2 nudged as
    :func:`nudged_cnn` nudges it), that weights file, and demo:cnn's example input."""
    lm, weights = nudged_cnn(tmp_path)
    a = lm.module.eval()
    b = copy.deepcopy(a)
    b.load_state_dict(torch.load(weights))
    return a, b, weights, lm.example_input


def cnn_window(make_window, qtbot):
    """A 1000×650 window on demo:cnn once its first run is shown."""
    win = make_window(["demo:cnn"])
    win.resize(1000, 650)
    qtbot.waitUntil(lambda: win.last_result is not None and win.is_idle(), timeout=60_000)
    return win


def compare_dialog(win, qtbot):
    """File → Compare with…, clicked; the dialog once it is up."""
    click_menu_action(qtbot, win, "&File", "actionCompareWith")
    qtbot.waitUntil(lambda: QApplication.activeModalWidget() is not None
                    and QApplication.activeModalWidget().objectName() == "compareDialog",
                    timeout=5000)
    return QApplication.activeModalWidget()


def compare_with(win, qtbot, weights=None, dtype=None):
    dlg = compare_dialog(win, qtbot)
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
