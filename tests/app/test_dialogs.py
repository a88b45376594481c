"""Open model dialog, recent models, and the in-window error banner."""

from PySide6.QtCore import QSettings, Qt
from PySide6.QtTest import QTest

from hookscope.app.error_banner import ErrorBanner
from hookscope.app.open_dialog import OpenModelDialog, factory_names
from hookscope.app.recent import MAX_RECENT, RecentModels
from hookscope.app.status import human_bytes
from tests.support.window_menus import click_menu_action


def test_factory_names_and_picking_a_py_file(qtbot, tmp_path):
    src = tmp_path / "m.py"
    src.write_text("import torch\n\ndef build():\n    pass\n\ndef _private():\n    pass\n\n"
                   "def other():\n    pass\n")
    assert factory_names(src) == ["build", "other"]
    dlg = OpenModelDialog()
    qtbot.addWidget(dlg)
    dlg.set_model_file(str(src))
    assert dlg.spec() == f"{src}:build"
    assert "other" in dlg.hint.text()
    dlg.set_model_file("/x/model.pt2")
    assert dlg.spec() == "/x/model.pt2" and dlg.weights() is None and not dlg.trust_pickle()
    assert dlg.spec_combo.findText("demo:cnn") >= 0


def test_recent_models_most_recent_first_and_capped(tmp_path):
    rec = RecentModels(QSettings(str(tmp_path / "r.ini"), QSettings.Format.IniFormat))
    for i in range(MAX_RECENT + 3):
        rec.add(f"demo:{i}")
    rec.add("demo:1")
    items = rec.items()
    assert items[0] == ("demo:1", None) and len(items) == MAX_RECENT
    assert len({s for s, _ in items}) == MAX_RECENT
    rec.clear()
    assert rec.items() == []


def test_recent_menu_reopens(window, qtbot):
    from hookscope.app.window_chrome import fill_recent_menu

    fill_recent_menu(window.actions_.recent_menu, window.recent, window.load)
    acts = [a for a in window.actions_.recent_menu.actions() if a.text() == "demo:clamp"]
    assert acts
    with qtbot.waitSignal(window.modelLoaded, timeout=30_000):
        click_menu_action(qtbot, window, "&File", "demo:clamp", submenu="Open &recent")


def test_error_banner_shows_and_closes(qtbot):
    b = ErrorBanner()
    qtbot.addWidget(b)
    b.show_error("bad thing: do this")
    assert b.text() == "bad thing: do this" and not b.isHidden()
    with qtbot.waitSignal(b.closed):
        QTest.mouseClick(b.close_button, Qt.MouseButton.LeftButton)
    assert b.isHidden() and b.text() == ""


def test_human_bytes():
    assert human_bytes(32) == "32 B"
    assert human_bytes(1536) == "1.5 KiB"
    assert human_bytes(3 * 1024 ** 3) == "3.0 GiB"


def test_open_demo_menu_loads_with_its_starting_plan(window, qtbot):
    with qtbot.waitSignal(window.modelLoaded, timeout=30_000):
        click_menu_action(qtbot, window, "&File", "actionDemo_cnn", submenu="Open &demo")
    qtbot.waitUntil(lambda: window.is_idle() and window.last_result is not None, timeout=30_000)
    assert set(window.last_result.captures) == {"conv1", "relu1", "conv2", "fc"}


def _answer_file_dialog(qtbot, file_path, seen: list) -> None:
    """When the file dialog is up: note the folder it opened in, pick the file,
    click its Open button."""
    from PySide6.QtCore import Qt
    from PySide6.QtWidgets import QApplication, QDialogButtonBox, QFileDialog

    dlg = QApplication.activeModalWidget()
    assert isinstance(dlg, QFileDialog) and dlg.objectName() == "fileDialog"
    seen.append(dlg.directory().absolutePath())
    dlg.selectFile(str(file_path))
    button = dlg.findChild(QDialogButtonBox).button(QDialogButtonBox.StandardButton.Open)
    qtbot.mouseClick(button, Qt.MouseButton.LeftButton)


def test_file_dialogs_start_in_the_folder_used_last(qtbot, tmp_path):
    from PySide6.QtCore import Qt, QTimer

    first, second = tmp_path / "models", tmp_path / "elsewhere"
    first.mkdir()
    second.mkdir()
    (first / "net.py").write_text("def build():\n    pass\n")
    (second / "w.pt").write_bytes(b"")
    dlg = OpenModelDialog()
    qtbot.addWidget(dlg)
    dlg.show()
    from PySide6.QtWidgets import QPushButton

    browse = dlg.findChild(QPushButton, "specBrowse")
    seen: list[str] = []
    QTimer.singleShot(0, lambda: _answer_file_dialog(qtbot, first / "net.py", seen))
    qtbot.mouseClick(browse, Qt.MouseButton.LeftButton)
    assert dlg.spec() == f"{first / 'net.py'}:build"
    # The next model dialog, even a new one, starts where that one ended.
    dlg2 = OpenModelDialog()
    qtbot.addWidget(dlg2)
    dlg2.show()
    QTimer.singleShot(0, lambda: _answer_file_dialog(qtbot, first / "net.py", seen))
    qtbot.mouseClick(dlg2.findChild(type(browse), "specBrowse"), Qt.MouseButton.LeftButton)
    assert seen[1] == str(first)
    # Weights have their own folder.
    QTimer.singleShot(0, lambda: _answer_file_dialog(qtbot, second / "w.pt", seen))
    qtbot.mouseClick(dlg2.findChild(type(browse), "weightsBrowse"), Qt.MouseButton.LeftButton)
    assert dlg2.weights() == str(second / "w.pt")
    assert seen[2] != str(second)  # first time for weights: not the model folder's memory
    QTimer.singleShot(0, lambda: _answer_file_dialog(qtbot, second / "w.pt", seen))
    qtbot.mouseClick(dlg2.findChild(type(browse), "weightsBrowse"), Qt.MouseButton.LeftButton)
    assert seen[3] == str(second)
