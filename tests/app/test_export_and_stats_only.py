"""File → Export and Run → Statistics only, driven through the window."""

import json
import subprocess
import sys

import numpy as np
import torch

from PySide6.QtWidgets import QDialogButtonBox

from hookscope.app.export_actions import export_captures, export_script
from hookscope.core import HookscopeError
from tests.support.file_dialogs import answer_file_dialog
from tests.support.thread_calls import count_calls
from tests.support.window_menus import click_menu_action


def test_export_captures_writes_what_the_window_shows(window, tmp_path):
    path = export_captures(window.session, window.ui, str(tmp_path / "caps.npz"))
    data = np.load(path)
    rec = window.last_result.captures["0"][0]
    np.testing.assert_array_equal(data["0#0"], rec.tensor.numpy())
    np.testing.assert_array_equal(data["0#0:before"], rec.pre_tensor.numpy())


def test_export_script_reproduces_the_window(window, tmp_path):
    path = export_script(window.session, window.ui, str(tmp_path / "repro.py"))
    out = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout.strip().splitlines()[-1])
    r = window.last_result
    assert got["output_with"] == [round(v, 6) for v in r.output_with.flatten().tolist()]
    assert got["outputs_differ"] is r.outputs_differ


def test_the_windows_script_export_loads_and_runs_the_model_off_the_gui_thread(
        window, qtbot, tmp_path, monkeypatch):
    import threading

    from hookscope.core.export import standalone_script
    from hookscope.core import load_model

    gui = threading.current_thread()
    seen = count_calls(monkeypatch, {"standalone_script": standalone_script,
                                     "load_model": load_model},
                       lambda: "gui" if threading.current_thread() is gui else "other")
    target = tmp_path / "from_menu.py"

    answer_file_dialog(target, QDialogButtonBox.StandardButton.Save)
    click_menu_action(qtbot, window, "&File", "actionExportScript")
    qtbot.waitUntil(lambda: target.exists() and "script written" in window.statusBar().currentMessage(),
                    timeout=60_000)
    assert seen[("standalone_script", "other")] == 1 and seen[("load_model", "other")] == 1
    assert not [k for k in seen if k[1] == "gui"]
    # the same script the synchronous export writes
    same = export_script(window.session, window.ui, str(tmp_path / "here.py"))
    assert target.read_text() == same.read_text()


def test_the_windows_script_export_failing_in_its_thread_shows_the_error(window, qtbot, tmp_path,
                                                                         monkeypatch):
    from hookscope.app import export_actions

    def failing(*args, **kwargs):
        raise HookscopeError("the model file is gone")

    monkeypatch.setattr(export_actions, "standalone_script", failing)
    target = tmp_path / "never.py"
    assert export_script(window.session, window.ui, str(target), gate=window.worker.gate) is None
    qtbot.waitUntil(lambda: "the model file is gone" in window.error_text(), timeout=10_000)
    assert not target.exists() and window.last_result is not None


def test_bad_export_name_shows_the_error_and_keeps_the_window(window, tmp_path):
    assert export_captures(window.session, window.ui, str(tmp_path / "caps.csv")) is None
    assert ".npz or .safetensors" in window.error_text()
    assert window.last_result is not None and window.loaded is not None


def test_stats_only_toggle_keeps_no_tensors_then_back(window, qtbot):
    window.set_live(True)
    act = window.actions_.stats_only
    click_menu_action(qtbot, window, "&Run", act)
    assert window.stats_only
    qtbot.waitUntil(lambda: window.last_result.captures["0"][0].tensor is None and window.is_idle(),
                    timeout=30_000)
    rec = window.last_result.captures["0"][0]
    assert rec.stats is not None and rec.stats.max <= 0.5 and window.last_result.captured_bytes == 0
    assert export_captures(window.session, window.ui, "/tmp/never.npz") is None
    assert "statistics-only" in window.error_text()
    click_menu_action(qtbot, window, "&Run", act)
    qtbot.waitUntil(lambda: isinstance(window.last_result.captures["0"][0].tensor, torch.Tensor)
                    and window.is_idle(), timeout=30_000)
