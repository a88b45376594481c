"""View → Logit lens: hidden until asked for; shown, every run brings the grid."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtTest import QTest

from hookscope.app.layout import arrange_docks
from hookscope.core import logit_lens
from support.window_menus import click_view_action


def _open_lens(win, qtbot):
    click_view_action(qtbot, win, "actionViewLens")
    qtbot.waitUntil(win.lens_dock.isVisible)


def test_lens_dock_shows_the_grid_of_the_run(make_window, qtbot):
    win = make_window(["demo:lm", "--intervene", "blocks.0=scale:0.3"])
    win.resize(1000, 650)
    arrange_docks(win, force=True)
    qtbot.waitUntil(lambda: win.last_result is not None and win.is_idle(), timeout=60_000)
    assert not win.lens_dock.isVisible() and "lens" not in win.last_result.extras
    _open_lens(win, qtbot)
    qtbot.waitUntil(lambda: win.lens_view.model.lens is not None and win.is_idle(), timeout=60_000)
    lens = win.lens_view.model.lens
    lm = win.session.model
    ref = logit_lens(lm.module, lm.example_input, win.session.current_plan(), lm.meaning)
    assert lens.top_with == ref.top_with and lens.top_without == ref.top_without
    m = win.lens_view.model
    # The embedding row (block 0's input), then one row per block.
    assert m.rowCount() == 3 and m.columnCount() == lm.example_input.shape[1]
    assert m.headerData(0, Qt.Orientation.Vertical, Qt.ItemDataRole.DisplayRole) == "blocks.0:input"
    last = m.index(2, m.columnCount() - 1)
    assert m.data(last) == lens.token(ref.top_with[2][-1]).replace(" ", "␣")
    assert "blocks.1" in m.data(last, Qt.ItemDataRole.ToolTipRole)
    # The chooser, with the keyboard: the run without the interventions.
    win.lens_view.which.setFocus()
    QTest.keyClick(win.lens_view.which, Qt.Key.Key_Down)
    assert m.which == "without" and m.data(m.index(0, 0)) == lens.token(
        ref.top_without[0][0]).replace(" ", "␣")
    # A token typed into the field: the cells are coloured by its probability.
    QTest.keyClicks(win.lens_view.token, "m")
    QTest.keyClick(win.lens_view.token, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: m.lens is not None and m.lens.target_id is not None
                    and win.is_idle(), timeout=60_000)
    assert not m.by_target and "p(m)" in m.data(last, Qt.ItemDataRole.ToolTipRole)
    win.lens_view.colour.setFocus()
    QTest.keyClick(win.lens_view.colour, Qt.Key.Key_Down)
    assert m.by_target and "p(m)" in win.lens_view.note.text()
    assert win.lens_dock.height() <= win.height() // 3 + 30
    # Hidden again, runs stop computing it.
    click_view_action(qtbot, win, win.lens_dock.toggleViewAction())
    assert "lens" not in win.session.derived


def test_lens_dock_on_a_model_it_cannot_read_says_so(make_window, qtbot):
    win = make_window(["demo:cnn"])
    qtbot.waitUntil(lambda: win.last_result is not None and win.is_idle(), timeout=60_000)
    _open_lens(win, qtbot)
    assert "--lens-head" in win.lens_view.note.text() and "lens" not in win.session.derived
    assert not win.error_text()


def test_the_head_field_names_an_unrecognised_head(make_window, qtbot):
    win = make_window(["demo:lm"])
    qtbot.waitUntil(lambda: win.last_result is not None and win.is_idle(), timeout=60_000)
    _open_lens(win, qtbot)
    qtbot.waitUntil(lambda: win.lens_view.model.lens is not None and win.is_idle(), timeout=60_000)
    QTest.keyClicks(win.lens_view.head, ",head")   # no final norm: the raw residual stream
    QTest.keyClick(win.lens_view.head, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: win.lens_view.model.lens.head.norm is None and win.is_idle(),
                    timeout=60_000)
    QTest.keyClicks(win.lens_view.head, "x")        # ",headx": not a layer of the model
    QTest.keyClick(win.lens_view.head, Qt.Key.Key_Return)
    assert "no layer 'headx'" in win.lens_view.note.text() and "lens" not in win.session.derived
