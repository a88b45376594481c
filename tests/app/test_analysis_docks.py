"""The analysis docks (Sweep, Logit lens, Generation, SAE features, Scan) share the
screen: tabs in one group under the activations, opened from the View menu with
the keyboard and the mouse, at 1000×650, 1400×900 and 2560×1440."""

from __future__ import annotations

from PySide6.QtCore import QSettings, Qt
from PySide6.QtGui import QAction
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QTabBar

from hookscope.app import create_window
from hookscope.app.analysis_docks import analysis_docks

VIEWS = [("actionViewSweep", "sweep_dock"), ("actionViewLens", "lens_dock"),
         ("actionViewGeneration", "generation_dock"), ("actionViewSae", "sae_dock")]


def _ready(qtbot, win):
    qtbot.waitUntil(lambda: win.last_result is not None and win.is_idle(), timeout=60_000)


def _open_from_view_menu(win, qtbot, action_name: str) -> None:
    """View → the dock: a click on the menu bar's View, then on its entry."""
    bar = win.menuBar()
    view = [a for a in bar.actions() if a.text() == "&View"][0]
    view_menu = view.menu()
    win.activateWindow()
    QTest.mouseClick(bar, Qt.MouseButton.LeftButton, pos=bar.actionGeometry(view).center())
    qtbot.waitUntil(view_menu.isVisible)
    toggle = win.findChild(QAction, action_name)
    QTest.mouseClick(view_menu, Qt.MouseButton.LeftButton, pos=view_menu.actionGeometry(toggle).center())
    qtbot.waitUntil(lambda: not view_menu.isVisible())


def _in_front(dock) -> bool:
    return dock.isVisible() and not dock.visibleRegion().isEmpty()


def _tab_bar_with(win, title: str) -> tuple[QTabBar, int]:
    for bar in win.findChildren(QTabBar):
        if bar.isVisible():
            for i in range(bar.count()):
                if bar.tabText(i) == title:
                    return bar, i
    raise AssertionError(f"no visible tab {title!r}")


def _visible_rows(view) -> float:
    """How many rows the view's viewport shows, from its first row's height."""
    return view.viewport().height() / view.visualRect(view.model().index(0, 0)).height()


def test_each_analysis_dock_is_a_tab_and_the_window_still_reaches_1000_by_650(make_window, qtbot):
    win = make_window(["demo:lm"])
    win.resize(1000, 650)
    _ready(qtbot, win)
    shown = []
    for action_name, attr in VIEWS:
        _open_from_view_menu(win, qtbot, action_name)
        dock = getattr(win, attr)
        shown.append(dock)
        qtbot.waitUntil(lambda: _in_front(dock))   # the one just asked for is the tab in front
        assert win.dockWidgetArea(dock) == Qt.DockWidgetArea.BottomDockWidgetArea
        assert not dock.isFloating()
        assert set(shown) - {dock} <= set(win.tabifiedDockWidgets(dock))
        # Any of them open, the window still shrinks to 1000×650 and shows its status bar.
        win.resize(1000, 650)
        qtbot.waitUntil(lambda: win.height() == 650)
        assert win.minimumSizeHint().height() <= 650 and win.minimumSize().height() <= 650
        assert win.statusBar().isVisible()
        assert win.statusBar().geometry().bottom() < win.height()
        # The analysis takes the centre's bottom, not the layer tree's height.
        assert dock.geometry().left() >= win.layer_dock.geometry().right()
        assert _visible_rows(win.tree.view) >= 5
    # "Run sweep" stays on the screen, one click on its tab away.
    bar, i = _tab_bar_with(win, "Sweep")
    QTest.mouseClick(bar, Qt.MouseButton.LeftButton, pos=bar.tabRect(i).center())
    qtbot.waitUntil(lambda: _in_front(win.sweep_dock))
    run = win.sweep_view.run_button
    assert run.isVisible() and not run.visibleRegion().isEmpty()
    assert win.rect().contains(run.mapTo(win, run.rect().bottomRight()))
    # Each dock shows all the centre's width: side by side they had a few hundred px each.
    assert win.sweep_dock.width() >= win.centralWidget().width() - 8
    assert {d.objectName() for d in analysis_docks(win)} >= {
        "sweepDock", "lensDock", "generationDock", "saeDock", "scanDock"}


def test_at_1400_by_900_the_next_token_table_keeps_five_rows_with_the_sweep_open(make_window, qtbot):
    win = make_window(["demo:lm"])
    win.resize(1400, 900)
    _ready(qtbot, win)
    table = win.outputs.meaning_view.table
    for action_name, attr in VIEWS:
        _open_from_view_menu(win, qtbot, action_name)
        dock = getattr(win, attr)
        qtbot.waitUntil(lambda: _in_front(dock))
        qtbot.wait(50)
        assert _visible_rows(table) >= 5, attr
    assert win.output_dock.height() > 0.5 * win.height()


def test_the_lens_shows_the_last_position_and_its_fields_whole(make_window, qtbot):
    win = make_window(["demo:lm"])
    win.resize(1000, 650)
    _ready(qtbot, win)
    _open_from_view_menu(win, qtbot, "actionViewLens")
    # a prompt longer than the grid's width: the grid has to scroll
    field = win.run_bar.input_edit
    field.selectAll()
    QTest.keyClicks(field, "text:the cat sat on the mat and the dog sat on the rug by the")
    QTest.keyClick(field, Qt.Key.Key_Return)
    view = win.lens_view
    qtbot.waitUntil(lambda: view.model.lens is not None and view.model.columnCount() > 50
                    and win.is_idle(), timeout=60_000)
    bar = view.table.horizontalScrollBar()
    qtbot.waitUntil(lambda: bar.maximum() > 0 and bar.value() == bar.maximum())
    last = view.table.visualRect(view.model.index(1, view.model.columnCount() - 1))
    assert view.table.viewport().rect().contains(last)
    for edit in (view.token, view.head):
        assert edit.width() >= edit.fontMetrics().horizontalAdvance("ln_f,lm_head")
    # the person scrolls left: a resize keeps their place
    QTest.keyClick(bar, Qt.Key.Key_Home)
    assert bar.value() == 0
    win.resize(1100, 650)
    qtbot.waitUntil(lambda: win.width() == 1100)
    assert bar.value() == 0


def test_the_open_docks_and_their_tabs_are_remembered_for_the_next_window(make_window, qtbot):
    win = make_window(["demo:lm"])
    _ready(qtbot, win)
    for action_name in ("actionViewSweep", "actionViewLens"):
        _open_from_view_menu(win, qtbot, action_name)
    qtbot.waitUntil(lambda: _in_front(win.lens_dock))
    win.close()   # saves the layout in the (test's own) settings
    assert QSettings("Hookscope", "Hookscope").value("window/state") is not None
    again = create_window(["demo:lm"])
    qtbot.addWidget(again)
    try:
        again.show()
        qtbot.waitUntil(lambda: again.sweep_dock.isVisible() and again.lens_dock.isVisible())
        assert not again.generation_dock.isVisible() and not again.sae_dock.isVisible()
        assert again.sweep_dock in again.tabifiedDockWidgets(again.lens_dock)
        assert _in_front(again.lens_dock)
    finally:
        again.remember_layout = False
        again.shutdown()


def test_a_layout_saved_before_the_tabs_is_not_put_back(make_window, qtbot):
    """An old layout (the analysis docks side by side) would bring the crush back."""
    win = make_window(["demo:lm"])
    for action_name in ("actionViewSweep", "actionViewLens"):
        _open_from_view_menu(win, qtbot, action_name)
    store = QSettings("Hookscope", "Hookscope")
    store.setValue("window/state", win.saveState(0))
    store.sync()
    win.remember_layout = False
    again = create_window(["demo:lm"])
    qtbot.addWidget(again)
    try:
        again.show()
        qtbot.waitUntil(again.layer_dock.isVisible)
        assert not again.sweep_dock.isVisible() and not again.lens_dock.isVisible()
    finally:
        again.remember_layout = False
        again.shutdown()
