"""The window asks before code named by a file runs: a session opened with File → Open
session, given on the command line, dropped on the window, or a recent-files entry.

The question shows what would run and its hash; Cancel runs nothing and leaves the
window with its model; Always remembers the file at that hash (an edit asks again).
The dialog is answered with real clicks and keys.
"""

from __future__ import annotations

import importlib.util
import json
import py_compile
import sys
from pathlib import Path

import pytest
from PySide6.QtCore import QMimeData, QPoint, QPointF, Qt, QUrl
from PySide6.QtGui import QDragEnterEvent, QDropEvent
from PySide6.QtWidgets import QApplication, QDialogButtonBox, QLabel

from hookscope.core.model.code_trust import code_to_run
from hookscope.core.model.trust_store import FILE_NAME, TrustStore
from tests.support.file_dialogs import answer_file_dialog
from tests.support.window_menus import click_menu_action

EVIL = """\
import pathlib
pathlib.Path({marker!r}).write_text("ran")
import torch
from torch import nn


def build():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2)), torch.ones(1, 3)
"""


def evil_session(folder: Path) -> tuple[Path, Path]:
    marker = folder / "MARKER"
    (folder / "evil.py").write_text(EVIL.format(marker=str(marker)))
    path = folder / "shared.hookscope.json"
    path.write_text(json.dumps({"format": "hookscope-session", "version": 1,
                                "model": {"spec": "evil.py:build"}}))
    return path, marker


def drop(win, path: Path) -> None:
    """Drag ``path`` over the window and drop it there (Qt's own drag events)."""
    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(str(path))])
    pos = QPointF(win.width() / 2, win.height() / 2)
    enter = QDragEnterEvent(pos.toPoint(), Qt.DropAction.CopyAction, mime,
                            Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier)
    QApplication.sendEvent(win, enter)
    assert enter.isAccepted()
    QApplication.sendEvent(win, QDropEvent(pos, Qt.DropAction.CopyAction, mime,
                                           Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier))


def wait_question(qtbot, win):
    qtbot.waitUntil(lambda: win.trust_gate.dialog is not None and win.trust_gate.dialog.isVisible(),
                    timeout=10_000)
    return win.trust_gate.dialog


def click(qtbot, button) -> None:
    qtbot.mouseClick(button, Qt.MouseButton.LeftButton)


def wait_loaded(qtbot, win, spec_end: str) -> None:
    qtbot.waitUntil(lambda: win.loaded is not None and win.loaded.spec.endswith(spec_end)
                    and win.last_result is not None and win.is_idle(), timeout=30_000)


def assert_usable(qtbot, win, spec: str) -> None:
    """The window still has ``spec`` open and runs it."""
    assert win.loaded.spec == spec
    with qtbot.waitSignal(win.resultShown, timeout=30_000):
        win.request_run()
    assert win.last_result is not None


def test_the_question_shows_the_file_and_hash_and_cancel_runs_nothing(window, qtbot, tmp_path):
    path, marker = evil_session(tmp_path)
    before = window.loaded.spec
    assert window.open_session(str(path)) is not None  # a load, refused in the runner's thread
    dlg = wait_question(qtbot, window)
    assert window.loaded.spec == before and not marker.exists()  # asked, not loaded
    text = dlg.findChild(QLabel, "trustCodeText").text()
    digest = code_to_run(f"{tmp_path}/evil.py:build").sha256   # evil.py, alone in its folder
    assert str((tmp_path / "evil.py").resolve()) in text and digest in text
    assert "1 file in all" in text and "\\n" not in text   # lines, not an escaped newline
    assert f"It is named by the session file {path}," in text
    click(qtbot, dlg.cancel)
    qtbot.waitUntil(lambda: window.trust_gate.dialog is None, timeout=5_000)
    assert not marker.exists()
    assert_usable(qtbot, window, before)
    assert_refused_in_banner(window, path, "the window keeps the model it had")


def assert_refused_in_banner(win, path: Path, shown: str) -> None:
    """The banner says which file was not opened, why, and what the window shows."""
    said = win.error_text()
    assert f"not opened: the session file {path}, because its model runs code" in said, said
    assert "you chose Cancel, so none of it ran" in said and shown in said, said
    assert win.banner.isVisible()


def test_cancel_keeps_the_model_the_window_had(make_window, qtbot, tmp_path):
    path, marker = evil_session(tmp_path)
    win = make_window(["demo:features"])
    wait_loaded(qtbot, win, "demo:features")
    win.open_session(str(path))
    click(qtbot, wait_question(qtbot, win).cancel)
    qtbot.waitUntil(lambda: win.trust_gate.dialog is None, timeout=5_000)
    assert not marker.exists()
    assert_usable(qtbot, win, "demo:features")
    assert_refused_in_banner(win, path, "the window keeps the model it had")  # after a run too


@pytest.mark.parametrize("key", [Qt.Key.Key_Escape, Qt.Key.Key_Return])
def test_escape_and_enter_do_not_run_it(window, qtbot, tmp_path, key):
    path, marker = evil_session(tmp_path)
    window.open_session(str(path))
    dlg = wait_question(qtbot, window)
    qtbot.keyClick(dlg, key)   # Enter presses the default button, which is Cancel
    qtbot.waitUntil(lambda: window.trust_gate.dialog is None, timeout=5_000)
    assert not marker.exists() and window.loaded.spec == "demo:clamp"


def test_always_runs_remembers_the_hash_and_an_edit_asks_again(window, qtbot, tmp_path):
    path, marker = evil_session(tmp_path)
    window.open_session(str(path))
    click(qtbot, wait_question(qtbot, window).always)
    wait_loaded(qtbot, window, "evil.py:build")
    assert marker.exists()
    assert TrustStore().trusts(code_to_run(window.loaded.spec))
    marker.unlink()

    window.load("demo:clamp")
    wait_loaded(qtbot, window, "demo:clamp")
    window.open_session(str(path))          # the same file at the same hash: no question
    assert window.trust_gate.dialog is None
    wait_loaded(qtbot, window, "evil.py:build")
    assert marker.exists() and window.trust_gate.dialog is None and not window.error_text()
    marker.unlink()

    with open(tmp_path / "evil.py", "a") as fh:
        fh.write("# changed\n")
    window.open_session(str(path))
    click(qtbot, wait_question(qtbot, window).cancel)
    qtbot.waitUntil(lambda: window.trust_gate.dialog is None, timeout=5_000)
    assert not marker.exists() and window.loaded.spec.endswith("evil.py:build")


def test_run_once_runs_and_asks_again_next_time(window, qtbot, tmp_path):
    path, marker = evil_session(tmp_path)
    window.open_session(str(path))
    click(qtbot, wait_question(qtbot, window).run_once)
    wait_loaded(qtbot, window, "evil.py:build")
    assert marker.exists() and not (Path(TrustStore().path)).exists()
    window.open_session(str(path))
    click(qtbot, wait_question(qtbot, window).cancel)


def test_open_session_through_the_file_menu_asks(window, qtbot, tmp_path):
    path, marker = evil_session(tmp_path)

    answer_file_dialog(path, QDialogButtonBox.StandardButton.Open)
    click_menu_action(qtbot, window, "&File", "actionOpenSession")
    click(qtbot, wait_question(qtbot, window).cancel)
    qtbot.waitUntil(lambda: window.trust_gate.dialog is None, timeout=5_000)
    assert not marker.exists()
    assert_usable(qtbot, window, "demo:clamp")


def test_a_dropped_session_asks(window, qtbot, tmp_path):
    path, marker = evil_session(tmp_path)
    drop(window, path)
    click(qtbot, wait_question(qtbot, window).cancel)
    assert not marker.exists()
    assert_usable(qtbot, window, "demo:clamp")


def test_a_session_on_the_command_line_opens_the_demo_and_asks(make_window, qtbot, tmp_path):
    path, marker = evil_session(tmp_path)
    win = make_window([str(path)])
    dlg = wait_question(qtbot, win)
    wait_loaded(qtbot, win, "demo:clamp")    # usable behind the question
    click(qtbot, dlg.run_once)
    wait_loaded(qtbot, win, "evil.py:build")
    assert marker.exists()


def test_a_session_on_the_command_line_cancelled_says_why_in_the_banner(make_window, qtbot,
                                                                         tmp_path):
    path, marker = evil_session(tmp_path)
    win = make_window([str(path)])
    dlg = wait_question(qtbot, win)
    assert f"It is named by the session file {path}," in \
        dlg.findChild(QLabel, "trustCodeText").text()
    wait_loaded(qtbot, win, "demo:clamp")
    click(qtbot, dlg.cancel)
    qtbot.waitUntil(lambda: win.trust_gate.dialog is None, timeout=5_000)
    assert not marker.exists()
    assert_usable(qtbot, win, "demo:clamp")
    assert_refused_in_banner(win, path, "the window shows demo:clamp (exercise 1) instead")


def test_a_session_on_the_command_line_with_trust_code_does_not_ask(make_window, qtbot, tmp_path):
    path, marker = evil_session(tmp_path)
    win = make_window([str(path), "--trust-code"])
    wait_loaded(qtbot, win, "evil.py:build")
    assert marker.exists() and win.trust_gate.dialog is None


def test_a_recent_entry_is_data_and_asks(window, qtbot, tmp_path):
    path, marker = evil_session(tmp_path)
    spec = f"{(tmp_path / 'evil.py').resolve()}:build"
    window.recent.add(spec)
    menu = window.actions_.recent_menu
    menu.popup(window.mapToGlobal(QPoint(10, 10)))   # aboutToShow fills it
    qtbot.waitUntil(menu.isVisible, timeout=5_000)
    act = next(a for a in menu.actions() if a.text() == spec)
    qtbot.mouseClick(menu, Qt.MouseButton.LeftButton, pos=menu.actionGeometry(act).center())
    dlg = wait_question(qtbot, window)
    assert f"It is named by the recent-files entry {spec}," in \
        dlg.findChild(QLabel, "trustCodeText").text()
    click(qtbot, dlg.cancel)
    assert not marker.exists()
    assert_usable(qtbot, window, "demo:clamp")
    assert f"not opened: the recent-files entry {spec}" in window.error_text()


def test_a_damaged_trust_store_trusts_nothing(window, qtbot, tmp_path, trust_store_dir):
    path, marker = evil_session(tmp_path)
    (trust_store_dir / FILE_NAME).write_text('{"format": "hookscope-trusted-code", "files": [')
    window.open_session(str(path))
    click(qtbot, wait_question(qtbot, window).cancel)
    assert not marker.exists()


# -- the yes covers every file the import could run -------------------------------------------
HELPED = """\
import torch
from torch import nn
import {helper}


def build():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(3, {helper}.WIDTH), nn.ReLU()), torch.ones(1, 3)
"""
MARK = "import pathlib\npathlib.Path({marker!r}).write_text('ran')\n"


def helped_session(folder: Path, helper: str, monkeypatch) -> Path:
    """A session naming model.py:build, whose width comes from the sibling module ``helper``."""
    (folder / "model.py").write_text(HELPED.format(helper=helper))
    (folder / f"{helper}.py").write_text("WIDTH = 4\n")
    monkeypatch.syspath_prepend(str(folder))
    monkeypatch.delitem(sys.modules, helper, raising=False)
    path = folder / "helped.hookscope.json"
    path.write_text(json.dumps({"format": "hookscope-session", "version": 1,
                                "model": {"spec": "model.py:build"}}))
    return path


def test_the_question_names_every_file_and_an_edited_sibling_asks_again(window, qtbot, tmp_path,
                                                                         monkeypatch):
    path = helped_session(tmp_path, "trust_window_helper", monkeypatch)
    window.open_session(str(path))
    dlg = wait_question(qtbot, window)
    text = dlg.findChild(QLabel, "trustCodeText").text()
    code = code_to_run(f"{tmp_path}/model.py:build")
    assert code.sha256 in text and "2 files in all" in text and str(tmp_path.resolve()) in text
    click(qtbot, dlg.always)
    wait_loaded(qtbot, window, "model.py:build")
    assert window.loaded.module[0].out_features == 4

    window.load("demo:clamp")
    wait_loaded(qtbot, window, "demo:clamp")
    marker = tmp_path / "SIBLING_RAN"
    (tmp_path / "trust_window_helper.py").write_text(MARK.format(marker=str(marker)) + "WIDTH = 5\n")
    monkeypatch.delitem(sys.modules, "trust_window_helper", raising=False)
    window.open_session(str(path))          # always trusted, but not this sibling: asked again
    dlg = wait_question(qtbot, window)
    assert code_to_run(f"{tmp_path}/model.py:build").sha256 in dlg.findChild(QLabel, "trustCodeText").text()
    click(qtbot, dlg.cancel)
    qtbot.waitUntil(lambda: window.trust_gate.dialog is None, timeout=5_000)
    assert not marker.exists() and "trust_window_helper" not in sys.modules
    assert_usable(qtbot, window, "demo:clamp")


def test_an_edited_parent_init_asks_again_after_always(window, qtbot, tmp_path, monkeypatch):
    pkg = tmp_path / "trust_window_pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "sub" / "model.py").write_text(EVIL.format(marker=str(tmp_path / "MODEL_RAN")))
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in ("trust_window_pkg", "trust_window_pkg.sub", "trust_window_pkg.sub.model"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    path = tmp_path / "pkg.hookscope.json"
    path.write_text(json.dumps({"format": "hookscope-session", "version": 1,
                                "model": {"spec": "trust_window_pkg.sub.model:build"}}))
    window.open_session(str(path))
    dlg = wait_question(qtbot, window)
    assert "3 files in all" in dlg.findChild(QLabel, "trustCodeText").text()
    click(qtbot, dlg.always)
    wait_loaded(qtbot, window, "model:build")

    window.load("demo:clamp")
    wait_loaded(qtbot, window, "demo:clamp")
    marker = tmp_path / "PARENT_INIT_RAN"
    (pkg / "__init__.py").write_text(MARK.format(marker=str(marker)))
    for name in ("trust_window_pkg", "trust_window_pkg.sub", "trust_window_pkg.sub.model"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    window.open_session(str(path))
    click(qtbot, wait_question(qtbot, window).cancel)
    qtbot.waitUntil(lambda: window.trust_gate.dialog is None, timeout=5_000)
    assert not marker.exists() and "trust_window_pkg" not in sys.modules
    assert_usable(qtbot, window, "demo:clamp")


def test_run_once_imports_from_source_not_a_planted_pyc(window, qtbot, tmp_path, monkeypatch):
    path = helped_session(tmp_path, "trust_window_pyc", monkeypatch)
    marker = tmp_path / "PYC_RAN"
    other = tmp_path / "scratch" / "other.py"
    other.parent.mkdir()
    other.write_text(MARK.format(marker=str(marker)) + "WIDTH = 9\n")
    py_compile.compile(str(other), doraise=True,
                       cfile=importlib.util.cache_from_source(str(tmp_path / "trust_window_pyc.py")),
                       invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH)
    window.open_session(str(path))
    click(qtbot, wait_question(qtbot, window).run_once)
    wait_loaded(qtbot, window, "model.py:build")
    assert window.loaded.module[0].out_features == 4 and not marker.exists()
