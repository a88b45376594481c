"""The Sweep dock's room with the scatter of estimate against run open, at 1000×650 and
1400×900: the heat map, the scatter (in a tab beside the grid's where the dock is short) and
the controls each get room to be read, nothing scrolls out of the dock (screenshots: tests/support/screenshots.py)."""

from __future__ import annotations


import pytest
from PySide6.QtCore import QRect, Qt
from PySide6.QtTest import QTest

from tests.support.screenshots import save_shot
from support.sweep_dock import fill_sweep, open_sweep_dock

PROMPT = "text:the cat sat on the "
SOURCE = "text:the dog sat on the "


def _whole(widget) -> bool:
    """Whether ``widget`` is shown whole (nothing of it clipped by a scroll area or a dock)."""
    return widget.isVisible() and widget.visibleRegion().boundingRect() == QRect(
        0, 0, widget.width(), widget.height())


def _all_lines(label) -> bool:
    """Whether a wrapped label is shown whole and tall enough for every line of its text."""
    return _whole(label) and label.height() >= label.heightForWidth(label.width())


@pytest.mark.parametrize("size", [(1000, 650), (1400, 900)], ids=["1000x650", "1400x900"])
def test_grid_scatter_and_controls_each_have_room(make_window, qtbot, size):
    win = make_window(["demo:lm", "--input", PROMPT])
    win.resize(*size)
    view = open_sweep_dock(win, qtbot)
    fill_sweep(view, "layer=blocks.*; pos=all", "{layer}=patch@pos={pos}", source=SOURCE,
               metric=("logit-diff", "#3", "#5"))
    QTest.mouseClick(view.verify_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: view.result is not None and win.is_idle()
                    and view.run_button.isEnabled(), timeout=60_000)
    qtbot.waitUntil(lambda: not view.scatter.isHidden())
    # what the run cost and did, in full: the labels' lines are never cut (the layout
    # settles once they know their width)
    qtbot.waitUntil(lambda: _all_lines(view.note) and _all_lines(view.estimate))
    assert "ρ = " in view.note.text()
    name = f"scatter_{size[0]}x{size[1]}"
    save_shot(win, f"{name}_grid")
    # the whole view fits the dock: no scroll bar around it
    outer = win.sweep_dock.widget()
    assert not outer.verticalScrollBar().isVisible()
    # the controls: Run, Verify and K whole, and at least three rows of fields in sight
    for w in (view.run_button, view.cancel_button, view.verify_button, view.verify_k):
        assert _whole(w), w.objectName()
    assert view._fields_scroll.viewport().height() >= 3 * view.axes.height()
    # the heat map: its plot at least 300×150 px
    rect = view.plot.plot.sceneBoundingRect()
    assert _whole(view.plot.graphics.viewport()) and rect.width() >= 280 and rect.height() >= 150
    # the scatter, as big: a tab beside the grid's in a short dock, a click away
    area = view.plot_area
    if area.mode() == "tabs":
        bar = area.tabs.tabBar()
        QTest.mouseClick(bar, Qt.MouseButton.LeftButton, pos=bar.tabRect(1).center())
    qtbot.waitUntil(view.scatter.isVisible)
    g = view.scatter.graphics
    assert _whole(g.viewport()) and g.width() >= 300 and g.height() >= 150
    save_shot(win, f"{name}_scatter")
