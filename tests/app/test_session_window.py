"""The window over the session: session files between window and CLI, undo/redo keys,
drops, the Intervention cell editor in Live mode, remembered layout, closing fast."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from support.mouse_events import drag_line
from PySide6.QtCore import QMimeData, QPointF, Qt, QUrl
from PySide6.QtGui import QDragEnterEvent, QDropEvent
from PySide6.QtWidgets import QApplication, QDoubleSpinBox, QStyle, QStyleOptionSpinBox

from hookscope.app.cli import main
from hookscope.core import Clamp, Noise, Plan, Scale, Zero, load_model
from hookscope.widgets.intervention_editor import InterventionEditor
from hookscope.widgets.layer_tree_model import COL_INTERVENTION

GATED = Path(__file__).with_name("gated_model.py")


def wait_result(qtbot, win, timeout=30_000):
    qtbot.waitUntil(lambda: win.last_result is not None and win.is_idle(), timeout=timeout)
    return win.last_result


def cli_json(capsys, *argv) -> dict:
    assert main(["run", *argv, "--json"]) == 0
    out, err = capsys.readouterr()
    return json.loads(out)


def test_saved_from_the_window_reopens_in_the_cli_with_the_same_numbers(make_window, qtbot,
                                                                       tmp_path, capsys):
    win = make_window(["demo:cnn", "--capture", "conv1,fc"])
    wait_result(qtbot, win)
    win.session.intervene("conv2", Zero())
    win.session.intervene("conv1", Clamp(-0.3, 0.4))
    with qtbot.waitSignal(win.resultShown, timeout=30_000):
        win.request_run()
    r = win.last_result
    path = win.save_session(str(tmp_path / "w.hookscope.json"))
    data = cli_json(capsys, "--session", str(path))
    np.testing.assert_array_equal(np.array(data["output_with"], dtype=np.float32),
                                  r.output_with.reshape(-1).numpy())
    np.testing.assert_array_equal(np.array(data["output_without"], dtype=np.float32),
                                  r.output_without.reshape(-1).numpy())
    assert set(data["captures"]) == {"conv1", "fc"}


def test_saved_by_the_cli_reopens_in_the_window_with_the_same_numbers(make_window, qtbot,
                                                                     tmp_path, capsys):
    f = tmp_path / "c.hookscope.json"
    data = cli_json(capsys, "demo:features", "--capture", "fc1,fc3", "--clamp", "fc2=-0.1:0.1",
                    "--input", "[[4.0, 3.0, 2.0, 1.0]]", "--save-session", str(f))
    win = make_window([str(f)])
    r = wait_result(qtbot, win)
    assert win.loaded.spec == "demo:features" and win.run_bar.input_text() == "[[4.0, 3.0, 2.0, 1.0]]"
    assert r.plan.clamp == {"fc2": (-0.1, 0.1)} and r.plan.capture == ("fc1", "fc3")
    np.testing.assert_array_equal(r.output_with.reshape(-1).numpy(),
                                  np.array(data["output_with"], dtype=np.float32))


def test_undo_and_redo_keys_take_plan_edits_back_and_forth(window, qtbot):
    model = window.tree.model
    start = window.session.plan
    model.set_capture("1", True)
    panel = window.panel.panels()[("0", 0)]
    qtbot.waitExposed(panel)
    panel.grab()   # painted at its final size: the line is where the mouse finds it
    drag_line(panel.hist_widget, panel.lo_line, -0.2)   # a real drag: one undo step
    assert window.session.plan.clamp["0"][0] == pytest.approx(-0.2, abs=0.05)
    assert panel.bounds() == window.session.plan.clamp["0"]
    edited = window.session.plan
    window.activateWindow()
    window.tree.view.setFocus()
    qtbot.keyClick(window.tree.view, Qt.Key.Key_Z, Qt.KeyboardModifier.ControlModifier)
    assert dict(model.plan().clamp) == {"0": (-0.5, 0.5)} and "1" in model.plan().capture
    qtbot.keyClick(window.tree.view, Qt.Key.Key_Z, Qt.KeyboardModifier.ControlModifier)
    assert model.plan() == start
    assert window.panel.panels()[("0", 0)].bounds() == (-0.5, 0.5)  # the lines follow the undo
    qtbot.keyClick(window.tree.view, Qt.Key.Key_Z,
                   Qt.KeyboardModifier.ControlModifier | Qt.KeyboardModifier.ShiftModifier)
    qtbot.keyClick(window.tree.view, Qt.Key.Key_Z,
                   Qt.KeyboardModifier.ControlModifier | Qt.KeyboardModifier.ShiftModifier)
    assert model.plan() == edited
    assert not window.actions_.redo.isEnabled() and window.actions_.undo.isEnabled()


def drop(win, path: Path) -> None:
    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(str(path))])
    pos = QPointF(win.width() / 2, win.height() / 2)
    enter = QDragEnterEvent(pos.toPoint(), Qt.DropAction.CopyAction, mime,
                            Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier)
    QApplication.sendEvent(win, enter)
    assert enter.isAccepted()
    QApplication.sendEvent(win, QDropEvent(pos, Qt.DropAction.CopyAction, mime,
                                           Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier))


def test_a_dropped_session_opens_and_a_damaged_one_changes_nothing(window, qtbot, tmp_path, capsys):
    bad = tmp_path / "bad.hookscope.json"
    bad.write_text('{"format": "hookscope-session", "version": 1, "model": {"spec": "demo:cnn"}, '
                   '"plan": {"interventions": {"conv1": {"kind": "clamp", "lo": 3, "hi": 1}}}}')
    before = (window.loaded, window.session.plan, window.last_result)
    with qtbot.waitSignal(window.errorShown, timeout=10_000) as sig:
        drop(window, bad)
    assert "bad.hookscope.json" in sig.args[0] and "lo must be <= hi" in sig.args[0]
    assert (window.loaded, window.session.plan, window.last_result) == before

    good = tmp_path / "good.hookscope.json"
    cli_json(capsys, "demo:cnn", "--capture", "fc", "--clamp", "conv1=:0.1", "--save-session", str(good))
    with qtbot.waitSignal(window.modelLoaded, timeout=30_000):
        drop(window, good)
    r = wait_result(qtbot, window)
    assert window.loaded.spec == "demo:cnn" and r.plan.clamp == {"conv1": (-float("inf"), 0.1)}


def test_intervention_cell_editor_chooses_a_kind_and_steps_its_parameter_live(make_window, qtbot):
    win = make_window(["demo:cnn", "--capture", "fc", "--live"])
    wait_result(qtbot, win)
    view, model = win.tree.view, win.tree.model
    idx = win.tree.proxy.mapFromSource(model.index_for_path("conv2", COL_INTERVENTION))
    view.scrollTo(idx)
    rect = view.visualRect(idx)
    qtbot.mouseClick(view.viewport(), Qt.MouseButton.LeftButton, pos=rect.center())
    assert view.currentIndex() == idx
    qtbot.keyClick(view, Qt.Key.Key_F2)               # edit the current cell
    editor = view.findChild(InterventionEditor)
    assert editor is not None
    qtbot.keyClicks(editor.kind_combo, "scale")
    assert win.session.plan.interventions == {"conv2": Scale(1.0)}
    spin = editor.findChild(QDoubleSpinBox, "param_factor")
    assert spin is not None
    for _ in range(4):
        qtbot.keyClick(spin, Qt.Key.Key_Up)          # 1.0 -> 1.2 in steps, each one a run
    qtbot.waitUntil(lambda: win.is_idle() and win.last_result.plan.interventions.get("conv2")
                    == Scale(1.2), timeout=30_000)
    ref = load_model("demo:cnn")
    h = ref.module.conv2.register_forward_hook(lambda _m, _i, out: out * 1.2)
    try:
        with torch.no_grad():
            want = ref.module(ref.example_input)
    finally:
        h.remove()
    torch.testing.assert_close(win.last_result.output_with, want, rtol=1e-6, atol=1e-6)
    assert model.index_for_path("conv2", COL_INTERVENTION).data() == "scale(1.2)"
    qtbot.keyClick(view.focusWidget() or spin, Qt.Key.Key_Return)  # the editing session ends
    assert win.session.undo() and "conv2" not in win.session.plan.interventions  # one step


def click_up_arrow(qtbot, spin) -> None:
    """A real mouse click on a spin box's up arrow."""
    opt = QStyleOptionSpinBox()
    spin.initStyleOption(opt)
    up = spin.style().subControlRect(QStyle.ComplexControl.CC_SpinBox, opt,
                                     QStyle.SubControl.SC_SpinBoxUp, spin)
    qtbot.mouseClick(spin, Qt.MouseButton.LeftButton, pos=up.center())


def test_a_noise_std_stepped_with_the_mouse_in_the_cell_editor_reruns_live(make_window, qtbot):
    win = make_window(["demo:cnn", "--capture", "fc", "--live"])
    wait_result(qtbot, win)
    view, model = win.tree.view, win.tree.model
    idx = win.tree.proxy.mapFromSource(model.index_for_path("conv1", COL_INTERVENTION))
    view.scrollTo(idx)
    qtbot.mouseClick(view.viewport(), Qt.MouseButton.LeftButton, pos=view.visualRect(idx).center())
    qtbot.keyClick(view, Qt.Key.Key_F2)
    editor = view.findChild(InterventionEditor)
    assert editor is not None
    qtbot.keyClicks(editor.kind_combo, "noise")
    assert win.session.plan.interventions == {"conv1": Noise(0.1, 0)}
    spin = editor.findChild(QDoubleSpinBox, "param_std")
    assert spin is not None
    for _ in range(3):
        click_up_arrow(qtbot, spin)
    std = spin.value()
    assert std > 0.1
    qtbot.waitUntil(lambda: win.is_idle() and win.last_result.plan.interventions.get("conv1")
                    == Noise(std, 0), timeout=30_000)

    def noisy(_m, _i, out):
        g = torch.Generator().manual_seed(0)
        return out + std * torch.randn(out.shape, generator=g)

    ref = load_model("demo:cnn")
    h = ref.module.conv1.register_forward_hook(noisy)
    try:
        with torch.no_grad():
            want = ref.module(ref.example_input)
    finally:
        h.remove()
    torch.testing.assert_close(win.last_result.output_with, want, rtol=1e-6, atol=1e-6)
    qtbot.keyClick(view.focusWidget() or spin, Qt.Key.Key_Return)  # the editing session ends
    qtbot.waitUntil(lambda: view.findChild(InterventionEditor) is None)


def test_geometry_and_docks_are_remembered(make_window, qtbot):
    from hookscope.app import create_window

    win = make_window(["demo:clamp"])
    wait_result(qtbot, win)
    win.resize(710, 507)
    win.output_dock.hide()
    win.close()
    again = create_window(["demo:clamp"])
    qtbot.addWidget(again)
    try:
        assert (again.width(), again.height()) == (710, 507)
        assert again.output_dock.isHidden() and not again.layer_dock.isHidden()
    finally:
        again.shutdown()


def test_closing_during_a_held_first_run_returns_without_waiting_for_it(make_window, qtbot):
    win = make_window([f"{GATED}:make_closed", "--capture", "lin"])
    qtbot.waitUntil(lambda: win.loaded is not None, timeout=30_000)
    m = win.loaded.module
    assert m.entered.wait(30)      # the first pass (recording shapes) is held in the forward
    shown = []
    win.resultShown.connect(shown.append)
    win.close()                    # returns while the forward is still held
    assert not win.isVisible() and not m.release.is_set()
    seen = []
    m.lin.register_forward_hook(lambda *_: seen.append(1))
    m.release.set()                # the held pass stops at its next layer; the thread ends
    qtbot.waitUntil(lambda: not win.worker.is_running, timeout=30_000)
    QApplication.processEvents()
    assert seen == [] and shown == []


THROWER = """
import sys
import torch
from torch import nn


class Thrower(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.lin = nn.Linear(3, 2)

    def forward(self, x):
        y = self.lin(x)
        if x[0, 0] == 7:
            raise KeyboardInterrupt("pressed inside the model")
        if x[0, 0] == 8:
            sys.exit(4)
        return y


def make():
    return Thrower(), torch.tensor([[1.0, 2.0, 3.0]])
"""


def test_a_model_throwing_keyboardinterrupt_or_exit_is_a_message_and_the_window_goes_on(
        make_window, qtbot, tmp_path):
    f = tmp_path / "thrower.py"
    f.write_text(THROWER)
    win = make_window([f"{f}:make", "--capture", "lin"])
    good = wait_result(qtbot, win)
    for first, name in (("7.0", "KeyboardInterrupt"), ("8.0", "SystemExit")):
        win.run_bar.input_edit.setText(f"[[{first}, 2.0, 3.0]]")
        with qtbot.waitSignal(win.errorShown, timeout=30_000) as sig:
            qtbot.keyClick(win.run_bar.input_edit, Qt.Key.Key_Return)
        assert name in sig.args[0]
        qtbot.waitUntil(win.is_idle, timeout=30_000)
        assert win.status.bar.currentMessage() != "running…"
        assert not win.loaded.module.lin._forward_hooks and not win.loaded.module.lin._forward_pre_hooks
    win.run_bar.input_edit.setText("[[1.0, 2.0, 3.0]]")
    with qtbot.waitSignal(win.resultShown, timeout=30_000):
        qtbot.keyClick(win.run_bar.input_edit, Qt.Key.Key_Return)
    assert torch.equal(win.last_result.output_with, good.output_with)
    assert win.error_text() == ""


def test_a_slow_run_shows_its_bar_from_the_start_and_esc_says_cancelled(make_window, qtbot):
    # A forward held at a gate: the bar says "running…" at once, wide enough for its
    # text, Cancel is offered; Esc cancels, and the bar and the status bar say so.
    from PySide6.QtTest import QTest

    win = make_window([f"{GATED}:make", "--capture", "lin"])
    wait_result(qtbot, win)
    bar = win.run_bar
    assert not bar.cancel_button.isEnabled() and bar.progress_text() == ""
    m = win.loaded.module
    m.release.clear()
    m.entered.clear()
    win.run_bar.input_edit.setFocus()
    QTest.keyClick(win.run_bar.input_edit, Qt.Key.Key_Return)
    assert m.entered.wait(30)
    qtbot.waitUntil(lambda: bar.progress_text() == "running…")
    assert bar.progress.isVisible() and bar.cancel_button.isEnabled()
    metrics = bar.progress.fontMetrics()
    assert bar.progress.width() >= metrics.horizontalAdvance("layer 12 / 24 · 15.0 s") + 20
    bar.show_progress(2, 6, 5.0)
    assert bar.progress_text() == "layer 2 / 6 · 5.0 s"
    QTest.keyClick(win, Qt.Key.Key_Escape)
    m.release.set()
    qtbot.waitUntil(lambda: win.is_idle(), timeout=30_000)
    assert bar.progress_text() == "cancelled" and not bar.cancel_button.isEnabled()
    assert "cancelled" in win.statusBar().currentMessage()
    # the next run clears it
    with qtbot.waitSignal(win.resultShown, timeout=30_000):
        QTest.keyClick(win.run_bar.input_edit, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: win.is_idle(), timeout=30_000)
    assert bar.progress_text() == "" and "cancelled" not in win.statusBar().currentMessage()


def test_a_run_of_the_replaced_model_never_reaches_the_window(make_window, qtbot):
    win = make_window([f"{GATED}:make", "--capture", "lin"])
    wait_result(qtbot, win)
    m = win.loaded.module
    m.release.clear()
    m.entered.clear()
    win.request_run()
    assert m.entered.wait(30)              # a run of the gated model is in flight
    shown = []
    win.resultShown.connect(lambda r: shown.append((win.loaded.spec, r)))
    win.load("demo:clamp", plan=Plan(capture=("0",)))
    m.release.set()                        # the old run may finish; its answer is stale
    qtbot.waitUntil(lambda: win.loaded.spec == "demo:clamp" and win.is_idle()
                    and win.last_result is not None and "0" in win.last_result.captures,
                    timeout=30_000)
    assert [spec for spec, _ in shown] == ["demo:clamp"]
    assert set(shown[0][1].captures) == {"0"}


def session_file_with_a_missing_layer(capsys, tmp_path) -> Path:
    f = tmp_path / "old.hookscope.json"
    cli_json(capsys, "demo:features", "--capture", "fc1", "--save-session", str(f))
    d = json.loads(f.read_text())
    d["plan"]["capture"].append("fc9")  # written for a model that had an fc9
    f.write_text(json.dumps(d))
    return f


def test_a_session_naming_a_missing_layer_is_refused_by_the_cli_in_one_line(capsys, tmp_path):
    f = session_file_with_a_missing_layer(capsys, tmp_path)
    assert main(["run", "--session", str(f)]) == 2
    out, err = capsys.readouterr()
    assert out == "" and len(err.strip().splitlines()) == 1
    assert "unknown layer 'fc9'" in err and "Did you mean" in err and "'fc1'" in err


def test_a_session_naming_a_missing_layer_opens_in_the_window_and_the_message_stays(
        make_window, qtbot, capsys, tmp_path):
    f = session_file_with_a_missing_layer(capsys, tmp_path)
    win = make_window([str(f)])
    r = wait_result(qtbot, win)
    assert set(r.captures) == {"fc1"}  # the rest of the plan ran
    assert "unknown layer 'fc9'" in win.banner.text() and "left out" in win.banner.text()
    with qtbot.waitSignal(win.resultShown, timeout=30_000):
        win.request_run()  # a good run does not hide what the load left out
    assert "fc9" in win.banner.text()
