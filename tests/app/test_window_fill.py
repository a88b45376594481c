"""The activation column at 1000x650 and 2560x1440: a few panels fill its height
(no empty band under exercise 1's single panel), many keep a readable height
and scroll; the layer tree's editable columns are on screen without scrolling."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt

from hookscope.core import Clamp
from hookscope.widgets.histogram_view import PLOT_HEIGHT


def _ready(qtbot, win, size):
    win.resize(*size)
    qtbot.waitUntil(lambda: win.last_result is not None and win.is_idle(), timeout=60_000)
    qtbot.waitUntil(lambda: bool(win.panel.panels()) and win.width() == size[0])


def _band(win) -> int:
    """Empty pixels between the last panel and the bottom of the scroll viewport."""
    last = list(win.panel.panels().values())[-1]
    return win.panel.scroll.viewport().height() - last.geometry().bottom()


@pytest.mark.parametrize("size", [(1000, 650), (2560, 1440)])
def test_the_default_screens_single_panel_fills_the_column(make_window, qtbot, size):
    win = make_window([])
    _ready(qtbot, win, size)
    viewport = win.panel.scroll.viewport()
    # Settled: the panel takes the height, less a few pixels, and needs no scroll bar.
    qtbot.waitUntil(lambda: 0 <= _band(win) <= 0.03 * viewport.height())
    (panel,) = win.panel.panels().values()
    assert not win.panel.scroll.verticalScrollBar().isVisible()
    # Taller than the old cap of 0.7 x the plot's width, side by side, never wider than the column.
    assert panel.hist_widget.height() > 0.7 * panel.hist_widget.width()
    assert panel.view_widget.height() == panel.hist_widget.height()
    assert not panel.is_stacked()
    assert panel.geometry().right() <= viewport.width()


def test_many_panels_keep_a_readable_height_and_scroll(make_window, qtbot):
    # Every layer of demo:cnn at 1000x650: more panels than the column can hold.
    win = make_window(["demo:cnn", "--capture", "*"])
    _ready(qtbot, win, (1000, 650))
    panels = list(win.panel.panels().values())
    assert len(panels) >= 8
    qtbot.waitUntil(lambda: win.panel.scroll.verticalScrollBar().isVisible())
    bar = win.panel.scroll.verticalScrollBar()
    assert bar.maximum() > 0
    for p in panels:
        assert PLOT_HEIGHT <= p.hist_widget.height() <= 1.1 * PLOT_HEIGHT
        assert p.geometry().right() <= win.panel.scroll.viewport().width()


def test_demo_cnn_fills_a_tall_window_without_stretching(make_window, qtbot):
    win = make_window(["demo:cnn"])
    _ready(qtbot, win, (2560, 1440))
    viewport = win.panel.scroll.viewport()
    qtbot.waitUntil(lambda: 0 <= _band(win) <= 0.03 * viewport.height())
    panels = list(win.panel.panels().values())
    heights = {p.hist_widget.height() for p in panels}
    # The panels share the height evenly, each plot wider than tall.
    assert max(heights) - min(heights) <= 2
    for p in panels:
        assert PLOT_HEIGHT <= p.hist_widget.height() < p.hist_widget.width()


def test_the_trees_edited_columns_fit_a_1000_px_window(make_window, qtbot):
    from PySide6.QtCore import QPoint
    from PySide6.QtTest import QTest

    from hookscope.widgets.layer_tree_model import COL_CALLS, COL_CAPTURE, COL_LAYER
    from hookscope.widgets.layer_tree_view import EDITABLE_COLUMNS

    win = make_window(["demo:cnn", "--capture", "conv1,relu1,conv2,fc", "--clamp", "conv1=-0.5:0.5"])
    _ready(qtbot, win, (1000, 650))
    tree = win.tree
    view, header = tree.view, tree.view.header()
    qtbot.waitUntil(lambda: tree.editable_right_edge() <= view.viewport().width())
    assert view.horizontalScrollBar().value() == 0
    for col in EDITABLE_COLUMNS:
        assert header.sectionViewportPosition(col) >= 0 and header.sectionSize(col) >= 30
    # A long name gives way, elided in the middle, its full path in the tooltip.
    assert view.textElideMode() == Qt.TextElideMode.ElideMiddle
    idx = tree.model.index_for_path("conv1", COL_LAYER)
    assert tree.model.data(idx, Qt.ItemDataRole.ToolTipRole).startswith("conv1")
    # The tick box is clickable where it is, with the real mouse: bn1 gets captured.
    cell = view.visualRect(tree.proxy.mapFromSource(tree.model.index_for_path("bn1", COL_CAPTURE)))
    assert cell.right() <= view.viewport().width()
    QTest.mouseClick(view.viewport(), Qt.MouseButton.LeftButton, pos=QPoint(cell.left() + 10, cell.center().y()))
    qtbot.waitUntil(lambda: "bn1" in win.session.plan.capture)
    # Type/Params/Calls are a scroll away.
    bar = view.horizontalScrollBar()
    assert bar.maximum() > 0
    view.scrollTo(tree.proxy.mapFromSource(tree.model.index_for_path("bn1", COL_CALLS)))
    qtbot.waitUntil(lambda: 0 <= header.sectionViewportPosition(COL_CALLS)
                    and header.sectionViewportPosition(COL_CALLS) + header.sectionSize(COL_CALLS)
                    <= view.viewport().width())


def test_the_fill_follows_a_panel_whose_statistics_grow(make_window, qtbot):
    # demo:cnn opens unclamped; a clamp adds lines under conv1's plots, and the
    # panels make room for them instead of growing a scroll bar.
    win = make_window(["demo:cnn"])
    _ready(qtbot, win, (2560, 1440))
    viewport = win.panel.scroll.viewport()
    qtbot.waitUntil(lambda: 0 <= _band(win) <= 0.03 * viewport.height())
    conv1 = win.panel.panels()[("conv1", 0)]
    lines = conv1.stats_label.sizeHint().height()
    runs = win.last_result
    win.session.intervene("conv1", Clamp(-0.5, 0.5))
    qtbot.mouseClick(win.run_bar.run_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: win.last_result is not runs and win.is_idle(), timeout=60_000)
    assert conv1.stats_label.sizeHint().height() > lines
    qtbot.waitUntil(lambda: 0 <= _band(win) <= 0.03 * viewport.height()
                    and not win.panel.scroll.verticalScrollBar().isVisible())
