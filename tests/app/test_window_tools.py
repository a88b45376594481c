"""The window as a daily tool: layout at small and large sizes, readouts in the
status bar, File → Export figure, View → Hooks and its leak warning."""

from __future__ import annotations

import pytest
from support.mouse_events import hover, line_point, view_to_viewport
from PySide6.QtGui import QAction, QImage

from hookscope.app.window_tools import export_figure, refresh_hooks
from hookscope.core import HookSession, Plan
from support.window_menus import click_view_action


def _ready(qtbot, win):
    qtbot.waitUntil(lambda: win.last_result is not None and win.is_idle(), timeout=60_000)
    for p in win.panel.panels().values():
        p.grab()


@pytest.mark.parametrize("size", [(1000, 650), (2560, 1440)])
def test_activation_plots_get_the_room_at_any_window_size(make_window, qtbot, size):
    win = make_window(["demo:cnn"])
    win.resize(*size)
    _ready(qtbot, win)
    qtbot.waitUntil(lambda: win.panel.panels()[("conv1", 0)].hist_widget.width() >= 290)
    p = win.panel.panels()[("conv1", 0)]
    # Side by side, each plot at least ~300 px wide, and nothing cut off at the right.
    assert not p.is_stacked()
    assert p.hist_widget.width() >= 290 and p.view_widget.width() >= 290
    assert p.geometry().right() <= win.panel.scroll.viewport().width()
    for dock in (win.layer_dock, win.output_dock):
        assert dock.isVisible() and dock.width() >= 240
    if size[0] >= 2000:
        # The extra width goes to the plots, and the panels fill the column's height.
        assert win.layer_dock.width() <= 600 and win.output_dock.width() <= 600
        viewport = win.panel.scroll.viewport().height()
        qtbot.waitUntil(lambda: win.panel._content.sizeHint().height() >= 0.85 * viewport)


def test_hovering_a_plot_reads_out_in_the_status_bar(window, qtbot):
    p = window.panel.panels()[("0", 0)]
    p.grab()
    # The first screen shows both of exercise 1's bounds, as lines one can grab.
    view = p.hist_widget.mapFromScene(p.hist_widget.getPlotItem().getViewBox().sceneBoundingRect())
    for line, value in ((p.lo_line, -0.5), (p.hi_line, 0.5)):
        assert line.value() == value and line.label.isVisible()
        assert view.boundingRect().contains(line_point(p.hist_widget, line))
    edges, counts = p.hist_post.getData()
    vb = p.hist_widget.getPlotItem().getViewBox()
    i = int(counts.argmax())
    hover(p.hist_widget, view_to_viewport(p.hist_widget, vb, 0.5 * (edges[i] + edges[i + 1]),
                                          0.5 * counts[i]))
    message = window.statusBar().currentMessage()
    assert message.startswith("0 (call 0) · [") and f"after: {counts[i]:,.0f}" in message


def test_file_menu_exports_the_activations_as_one_figure(window, tmp_path):
    act = window.findChild(QAction, "actionExportFigure")
    file_actions = [a.objectName() for a in window.menuBar().actions()[0].menu().actions()]
    assert file_actions.index("actionExportFigure") == file_actions.index("actionExportScript") + 1
    assert act.shortcut().toString() == "Ctrl+Shift+E"
    out = export_figure(window, str(tmp_path / "fig.png"))
    img = QImage(str(out))
    panel = window.panel.panels()[("0", 0)]
    assert img.width() >= panel.width() and img.height() >= panel.height()
    assert export_figure(window, str(tmp_path / "fig.txt")) is None
    assert ".png or .svg" in window.error_text()


def test_hooks_view_lists_the_users_hooks_and_warns_of_a_leaked_one(make_window, qtbot, tmp_path):
    f = tmp_path / "hooked.py"
    f.write_text("import torch\n\n"
                 "def log_shape(module, args, output):\n    return None\n\n"
                 "def make():\n"
                 "    torch.manual_seed(0)\n"
                 "    m = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU())\n"
                 "    m[0].register_forward_hook(log_shape)\n"
                 "    return m, torch.ones(1, 3)\n")
    # a clamp that reaches the output (below 0 the ReLU would absorb it: a receipt alarm)
    win = make_window([f"{f}:make", "--capture", "0,1", "--clamp", "0=-0.5:0.1"])
    _ready(qtbot, win)
    toggle = win.findChild(QAction, "actionViewHooks")
    view_menu = [a.menu() for a in win.menuBar().actions() if a.text() == "&View"][0]
    assert toggle in view_menu.actions() and not win.hooks_dock.isVisible()
    click_view_action(qtbot, win, toggle)
    assert win.hooks_dock.isVisible()
    table = win.hooks_view.table
    rows = [[table.topLevelItem(i).text(c) for c in range(5)] for i in range(table.topLevelItemCount())]
    line = f.read_text().splitlines().index("def log_shape(module, args, output):") + 1
    assert rows == [["0", "forward hook", "log_shape", f"hooked.py:{line}", "yours"]]
    assert "Hookscope's hooks were all removed" in win.hooks_view.summary.text()
    assert win.banner.isHidden()
    # A Hookscope hook left on the model after a run: listed in red, and the banner says so.
    session = HookSession(Plan(capture=("1",)).resolve(win.loaded.module))
    session.__enter__()
    try:
        assert refresh_hooks(win)
        whose = [table.topLevelItem(i).text(4) for i in range(table.topLevelItemCount())]
        assert whose.count("Hookscope (left over!)") == 1
        assert "Hookscope left 1 hook on the model" in win.error_text() and "(on 1)" in win.error_text()
        assert "outlived its run" in win.hooks_view.summary.text()
    finally:
        session.remove()
    assert refresh_hooks(win)
    assert table.topLevelItemCount() == 1


def test_the_figure_holds_every_panel_and_the_output_but_no_controls_or_frame(make_window, qtbot,
                                                                              tmp_path):
    # A layer chosen in the tree frames its panel in blue; the figure leaves the frame,
    # the view boxes and the log boxes out, and has the output panel on the right.
    from PySide6.QtCore import QPoint, Qt
    from PySide6.QtTest import QTest

    from hookscope.widgets.layer_tree_model import COL_LAYER

    win = make_window(["demo:lm", "--capture", "blocks.0.attn.probs,blocks.1.mlp",
                       "--clamp", "blocks.1.mlp=-1:1"])
    win.resize(1400, 900)
    _ready(qtbot, win)
    tree = win.tree
    rect = tree.view.visualRect(tree.proxy.mapFromSource(tree.model.index_for_path("blocks.1.mlp", COL_LAYER)))
    QTest.mouseClick(tree.view.viewport(), Qt.MouseButton.LeftButton, pos=QPoint(rect.center()))
    panel = win.panel.panels()[("blocks.1.mlp", 0)]
    qtbot.waitUntil(lambda: panel.highlighted)
    combo = panel.chooser.combo
    assert combo.isVisible()
    png = QImage(str(export_figure(win, str(tmp_path / "fig.png"))))
    ratio = png.devicePixelRatio() or 1
    assert png.width() / ratio >= win.panel._content.width() + win.outputs.width()
    svg = export_figure(win, str(tmp_path / "fig.svg")).read_text()
    assert "Next token" in svg        # the output panel's table title
    assert combo.currentText() not in svg and ">log<" not in svg
    assert "#1976d2" not in svg.lower()
    # and the window is as it was
    assert combo.isVisible() and panel.highlighted


def test_at_1000_by_650_the_output_chart_has_room_and_an_empty_hooks_list_stays_small(
        make_window, qtbot):
    from PySide6.QtCore import Qt
    from PySide6.QtTest import QTest

    from hookscope.app.layout import arrange_docks

    win = make_window(["demo:lm"])
    win.resize(1000, 650)
    arrange_docks(win, force=True)
    _ready(qtbot, win)
    out = win.outputs
    # identical outputs: no flat difference plot halving the chart
    assert not out.diff_plot.isVisible()
    qtbot.waitUntil(lambda: out.plot.getViewBox().height() >= 100)
    # View → Hooks through the menu, with the keyboard and the mouse
    click_view_action(qtbot, win, "actionViewHooks")
    qtbot.waitUntil(win.hooks_dock.isVisible)
    assert not win.hooks_view.hooks and win.hooks_view.table.isHidden()
    qtbot.waitUntil(lambda: win.hooks_dock.height() <= 0.15 * win.height())
    assert out.plot.getViewBox().height() >= 80
