"""File → Attach SAE: the SAE goes on the selected layer, the SAE features dock shows
each position's top features and reconstruction error; a mismatch is a banner."""

from __future__ import annotations

from PySide6.QtGui import QAction

from hookscope.app.lm_tools import attach_sae_dialog
from hookscope.core import SaeAblate, load_sae, sae_features
from hookscope.core.model.sae import sae_folder
from tests.support.window_menus import click_menu_action


def test_attach_sae_shows_features_and_edits(make_window, qtbot):
    win = make_window(["demo:lm"])
    qtbot.waitUntil(lambda: win.last_result is not None and win.is_idle(), timeout=60_000)
    file_actions = [a.objectName() for a in win.menuBar().actions()[0].menu().actions()]
    assert "actionAttachSae" in file_actions and not win.sae_dock.isVisible()
    # A width mismatch (the tree knows blocks.0.mlp.0 is 256 wide): refused in the banner.
    assert win.tree.select_path("blocks.0.mlp.0")
    assert not attach_sae_dialog(win, str(sae_folder("demo")))
    assert "64" in win.error_text() and "256" in win.error_text() and not win.session.saes
    assert win.tree.select_path("blocks.0")
    first = win.last_result
    assert attach_sae_dialog(win, str(sae_folder("demo")))
    qtbot.waitUntil(lambda: win.last_result is not first and win.is_idle(), timeout=60_000)
    assert win.sae_dock.isVisible()
    view = win.sae_view
    lm = win.session.model
    n = lm.example_input.shape[1]
    assert view.table.rowCount() == n
    ref = sae_features(lm.module, lm.example_input, win.session.current_plan(), "blocks.0")["blocks.0"]
    assert view.table.item(n - 1, 4).text() == f"{ref.error_without[-1]:.4f}"
    # Ablate the last position's top feature: its row's "with" cell changes, in bold.
    top = ref.top_without[-1][0][0]
    second = win.last_result
    win.session.intervene("blocks.0", SaeAblate((top,)))
    win.request_run()
    qtbot.waitUntil(lambda: win.last_result is not second and win.is_idle(), timeout=60_000)
    cell = view.table.item(n - 1, 3)
    assert f"{top}=" not in cell.text() and cell.font().bold()
    assert load_sae("demo").d_sae == int(view.note.text().split(": ")[1].split()[0])
    assert win.findChild(QAction, "actionViewSae") is not None


def test_file_attach_sae_takes_demo_as_the_command_line_does(make_window, qtbot):
    """The menu's dialog takes a folder or ``demo`` (a folder picker alone could not)."""
    from PySide6.QtCore import QPoint, Qt
    from PySide6.QtTest import QTest
    from PySide6.QtWidgets import QDialog

    from hookscope.widgets.layer_tree_model import COL_LAYER

    win = make_window(["demo:lm"])
    qtbot.waitUntil(lambda: win.last_result is not None and win.is_idle(), timeout=60_000)
    tree = win.tree
    idx = tree.proxy.mapFromSource(tree.model.index_for_path("blocks.0", COL_LAYER))
    tree.view.scrollTo(idx)
    rect = tree.view.visualRect(idx)
    QTest.mouseClick(tree.view.viewport(), Qt.MouseButton.LeftButton,
                     pos=QPoint(rect.left() + 20, rect.center().y()))
    assert tree.selected_path() == "blocks.0"
    click_menu_action(qtbot, win, "&File", "actionAttachSae")
    qtbot.waitUntil(lambda: win.findChild(QDialog, "attachSaeDialog") is not None)
    dialog = win.findChild(QDialog, "attachSaeDialog")
    qtbot.waitExposed(dialog)
    field = dialog.folder
    assert field.text() == "demo"   # proposed for demo:lm
    field.setFocus()
    QTest.keyClick(field, Qt.Key.Key_A, Qt.KeyboardModifier.ControlModifier)
    QTest.keyClicks(field, "demo")
    first = win.last_result
    QTest.keyClick(field, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: "blocks.0" in win.session.saes)
    qtbot.waitUntil(lambda: win.last_result is not first and win.is_idle(), timeout=60_000)
    assert win.session.saes["blocks.0"] == "demo"
    assert win.sae_dock.isVisible() and not win.sae_dock.visibleRegion().isEmpty()
    assert win.sae_view.table.rowCount() == win.session.model.example_input.shape[1]
