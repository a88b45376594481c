"""View → Generation: Generate continues the prompt without and with the plan; the two
continuations side by side, the first divergence highlighted."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtTest import QTest

from hookscope.core import generate
from hookscope.widgets.generation_view import FIRST
from support.window_menus import click_view_action


def test_generate_shows_both_continuations(make_window, qtbot):
    win = make_window(["demo:lm", "--intervene", "blocks.0=scale:0.2"])
    qtbot.waitUntil(lambda: win.last_result is not None and win.is_idle(), timeout=60_000)
    click_view_action(qtbot, win, "actionViewGeneration")
    qtbot.waitUntil(win.generation_dock.isVisible)
    view = win.generation_view
    view.steps.selectAll()
    QTest.keyClicks(view.steps, "12")
    first = win.last_result
    QTest.mouseClick(view.button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: view.generation is not None and win.is_idle(), timeout=60_000)
    assert win.last_result is not first
    lm = win.session.model
    ref = generate(lm.module, lm.example_input, win.session.current_plan(), lm.meaning, 12)
    g = view.generation
    assert g.without.ids == ref.without.ids and g.with_.ids == ref.with_.ids
    assert g.first_divergence == ref.first_divergence is not None
    assert f"step {ref.first_divergence}" in view.note.text()
    assert ref.note and ref.note in view.note.text()  # demo:lm has no KV cache: the note says so
    assert FIRST in view.with_.toHtml().lower() or FIRST.upper() in view.with_.toHtml()
    assert view.table.rowCount() == 12
    # At 1000×650 (the tab of the analysis docks) the step table's headers read whole,
    # and each cell holds its top tokens in full in its tooltip.
    win.resize(1000, 650)
    qtbot.waitUntil(lambda: win.width() == 1000)
    header = view.table.horizontalHeader()
    for c, title in enumerate(("step", "top without", "top with")):
        assert header.sectionSize(c) >= header.fontMetrics().horizontalAdvance(title) + 8, title
    cell = view.table.item(0, 1)
    assert cell.toolTip() == cell.text() and cell.text().count(",") == 2
    # Hidden, runs stop generating.
    click_view_action(qtbot, win, win.generation_dock.toggleViewAction())
    assert "generation" not in win.session.derived


def test_generate_on_a_model_without_tokens_says_so_and_still_shows_the_run(make_window, qtbot):
    win = make_window(["demo:cnn"])
    qtbot.waitUntil(lambda: win.last_result is not None and win.is_idle(), timeout=60_000)
    win.generation_dock.show()
    first = win.last_result
    QTest.mouseClick(win.generation_view.button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: win.last_result is not first and win.is_idle(), timeout=60_000)
    assert "token ids" in win.error_text() and "token ids" in win.generation_view.note.text()
    assert win.generation_view.generation is None and win.last_result.outputs_differ is False
