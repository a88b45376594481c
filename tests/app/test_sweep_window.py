"""View → Sweep: typed axes and template, Run clicked, the grid arrives from the runner with
the numbers sweep() gives, labelled by layer names and token strings; Cancel stops it."""

from __future__ import annotations

import numpy as np
from PySide6.QtCore import Qt
from PySide6.QtGui import QAction
from PySide6.QtTest import QTest

from hookscope.core import parse_input
from hookscope.core.capture import sweep

SOURCE = "text:the dog sat on the "


def _open_sweep(win, qtbot):
    view_menu = [a.menu() for a in win.menuBar().actions() if a.text() == "&View"][0]
    win.activateWindow()
    QTest.keyClick(win, Qt.Key.Key_V, Qt.KeyboardModifier.AltModifier)
    qtbot.waitUntil(view_menu.isVisible)
    toggle = win.findChild(QAction, "actionViewSweep")
    QTest.mouseClick(view_menu, Qt.MouseButton.LeftButton,
                     pos=view_menu.actionGeometry(toggle).center())
    qtbot.waitUntil(win.sweep_dock.isVisible)


def _type(field, text):
    field.setFocus()
    QTest.keyClick(field, Qt.Key.Key_A, Qt.KeyboardModifier.ControlModifier)
    QTest.keyClicks(field, text)


def test_sweep_dock_runs_the_grid_in_the_runner(make_window, qtbot):
    win = make_window(["demo:lm", "--input", "text:the cat sat on the "])
    win.resize(1000, 800)
    qtbot.waitUntil(lambda: win.last_result is not None and win.is_idle(), timeout=60_000)
    _open_sweep(win, qtbot)
    view = win.sweep_view
    _type(view.axes, "layer=blocks.*; pos=14:19")
    _type(view.template, "{layer}=patch@pos={pos}")
    _type(view.source, SOURCE)
    _type(view.metric_box.lineEdit(), "kl")
    QTest.mouseClick(view.run_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: view.model.result is not None, timeout=60_000)
    lm = win.session.model
    x = parse_input("text:the cat sat on the ", lm.example_input, lm.meaning.codec)
    want = sweep(lm.module, x, {"layer": "blocks.*", "pos": "14:19"},
                 {"{layer}": f"patch:{SOURCE}@pos={{pos}}"}, "kl", meaning=lm.meaning)
    got = view.model.result
    assert np.array_equal(got.values, want.values)
    m = view.model
    assert m.rowCount() == 2 and m.columnCount() == 5
    assert m.headerData(0, Qt.Orientation.Vertical) == "blocks.0"
    assert m.headerData(4, Qt.Orientation.Horizontal) == want.axes["pos"][4]
    tip = m.data(m.index(0, 4), Qt.ItemDataRole.ToolTipRole)
    assert tip.startswith(f"layer blocks.0, pos {want.axes['pos'][4]}: kl = ")
    assert view.progress.isHidden() and view.run_button.isEnabled()
    assert view.progress.value() == view.progress.maximum() == 10
    # Double-clicking a cell runs it in the main view: its plan, its layer captured.
    before = win.last_result
    table = view.table
    table.scrollTo(m.index(1, 4))
    rect = table.visualRect(m.index(1, 4))
    assert table.viewport().rect().contains(rect.center())
    QTest.mouseClick(table.viewport(), Qt.MouseButton.LeftButton, pos=rect.center())
    QTest.mouseDClick(table.viewport(), Qt.MouseButton.LeftButton, pos=rect.center())
    qtbot.waitUntil(lambda: win.last_result is not before and win.is_idle(), timeout=60_000)
    shown = win.last_result
    assert dict(shown.plan.interventions) == dict(got.plan_of(layer="blocks.1", pos=18).interventions)
    assert "blocks.1" in shown.captures
    assert np.array_equal(shown.output_with.numpy(),
                          got.run_cell(layer="blocks.1", pos=18).output_with.numpy())
    assert win.session.can_undo


def test_a_template_without_its_source_says_so_in_the_banner(make_window, qtbot):
    win = make_window(["demo:lm"])
    qtbot.waitUntil(lambda: win.last_result is not None and win.is_idle(), timeout=60_000)
    _open_sweep(win, qtbot)
    view = win.sweep_view
    _type(view.axes, "layer=blocks.*")
    _type(view.template, "{layer}=patch")
    _type(view.source, "")
    QTest.mouseClick(view.run_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: "source input" in view.note.text(), timeout=60_000)
    assert view.model.result is None and view.run_button.isEnabled()


def test_cancel_stops_a_long_sweep_and_leaves_no_hook(make_window, qtbot):
    win = make_window(["demo:lm"])
    qtbot.waitUntil(lambda: win.last_result is not None and win.is_idle(), timeout=60_000)
    _open_sweep(win, qtbot)
    view = win.sweep_view
    _type(view.axes, "f=linspace(0,1,9000)")
    _type(view.template, "blocks.0=scale:{f}")
    QTest.mouseClick(view.run_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: view.progress.value() > 0, timeout=60_000)
    assert view.cancel_button.isEnabled() and not view.run_button.isEnabled()
    QTest.mouseClick(view.cancel_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(win.is_idle, timeout=60_000)
    assert view.note.text() == "cancelled" and view.model.result is None
    assert view.progress.value() < 9000 and view.run_button.isEnabled()
    for m in win.session.model.module.modules():
        assert not m._forward_hooks and not m._forward_pre_hooks
