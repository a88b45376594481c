"""A layer panel showing model A against model B exports its data as a person does it
(right click on the plot, Export data as CSV…, a name typed into the file dialog, Save):
the columns are headed "A" and "B", and hold the values two hand-hooked models give.

Tolerance: the window runs its forwards on the runner's thread, the hand hooks on this one,
and the CSV writes each float32 value as a Python float's text; compared to 1e-6 relative."""

from __future__ import annotations

import csv

import numpy as np
import torch
from PySide6.QtCore import QPoint, Qt
from PySide6.QtGui import QContextMenuEvent
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QApplication, QDialogButtonBox

from tests.support.compare_window import ROWS, click_point, cnn_window, compare_with, nudged_models
from tests.support.file_dialogs import answer_file_dialog
from tests.support.hand_hooks import hooked_outputs


def export_view_csv(qtbot, panel, file_path) -> list[list[str]]:
    """The panel's shape view exported as CSV through its right-click menu; its rows."""
    widget = panel.view_widget
    vp = widget.viewport()
    pos = QPoint(vp.width() // 2, vp.height() // 2)
    QTest.mouseClick(vp, Qt.MouseButton.RightButton, pos=pos)
    QApplication.sendEvent(vp, QContextMenuEvent(QContextMenuEvent.Reason.Mouse, pos,
                                                 vp.mapToGlobal(pos)))
    menu = panel.view_tools.menu
    qtbot.waitUntil(lambda: menu is not None and menu.isVisible())
    act = [a for a in menu.actions() if a.objectName() == "exportCSV"][0]
    answered: list = []
    answer_file_dialog(file_path, QDialogButtonBox.StandardButton.Save, answered)
    QTest.mouseClick(menu, Qt.MouseButton.LeftButton, pos=menu.actionGeometry(act).center())
    qtbot.waitUntil(lambda: answered and file_path.exists(), timeout=10_000)
    with file_path.open(newline="", encoding="utf-8") as f:
        return list(csv.reader(f))


def test_an_a_against_b_panel_exports_columns_a_and_b(make_window, qtbot, tmp_path):
    a, b, weights, x = nudged_models(tmp_path)
    hand_a, hand_b = hooked_outputs(a, x, ROWS), hooked_outputs(b, x, ROWS)

    win = cnn_window(make_window, qtbot)
    compare_with(win, qtbot, weights=str(weights))

    # conv2's feature maps (the nudged layer): channel, y, x, then A's value and B's
    panel = click_point(win, qtbot, "conv2")
    panel.grab()
    rows = export_view_csv(qtbot, panel, tmp_path / "conv2_ab.csv")
    assert rows[0] == ["channel", "y", "x", "A", "B"]
    want_a, want_b = hand_a["conv2"][0], hand_b["conv2"][0]   # the first sample
    assert len(rows) - 1 == want_a.numel()
    idx = np.array([[int(v) for v in r[:3]] for r in rows[1:]])
    got_a = torch.tensor([float(r[3]) for r in rows[1:]])
    got_b = torch.tensor([float(r[4]) for r in rows[1:]])
    at = (idx[:, 0], idx[:, 1], idx[:, 2])
    torch.testing.assert_close(got_a, want_a[at], rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(got_b, want_b[at], rtol=1e-6, atol=1e-6)
    assert not torch.equal(got_a, got_b)   # nudged: the two columns are not one copied twice

    # fc's units (bars), downstream of the nudge: unit, A, B
    panel = click_point(win, qtbot, "fc")
    panel.grab()
    rows = export_view_csv(qtbot, panel, tmp_path / "fc_ab.csv")
    assert rows[0] == ["unit", "A", "B"]
    assert [int(r[0]) for r in rows[1:]] == list(range(hand_a["fc"].numel()))
    torch.testing.assert_close(torch.tensor([float(r[1]) for r in rows[1:]]),
                               hand_a["fc"].reshape(-1), rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(torch.tensor([float(r[2]) for r in rows[1:]]),
                               hand_b["fc"].reshape(-1), rtol=1e-6, atol=1e-6)

    # the comparison closed: the same panel's CSV is the run's value against its reference
    QTest.mouseClick(win.compare_tool.view.close_button, Qt.MouseButton.LeftButton)
    panel = win.panel.panels()[("conv2", 0)]
    assert panel.record.pair is None
    panel.grab()
    rows = export_view_csv(qtbot, panel, tmp_path / "conv2_run.csv")
    assert "A" not in rows[0] and "B" not in rows[0] and "value" in rows[0]
