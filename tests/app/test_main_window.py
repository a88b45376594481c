"""The main window as a user meets it: exercise 1 on start, demos, errors, devices, menus."""

import numpy as np
import pytest
import torch
from PySide6.QtCore import Qt
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QComboBox, QLineEdit, QPushButton, QTreeView, QWidget

from hookscope.app.demo_setup import DEFAULT_PLANS
from hookscope.app.recent import RecentModels
from hookscope.core import Plan, available_devices, compare, load_model
from hookscope.core.engine.output_diff import flat_floats
from hookscope.widgets.layer_tree_model import COL_CAPTURE, COL_HI, COL_LO, COL_SHAPE
from tests.support.window_menus import click_view_action


def core_outputs(spec: str, plan: Plan, input_text: str | None = None):
    from hookscope.core import parse_input

    lm = load_model(spec)
    x = parse_input(input_text or "", lm.example_input)
    r = compare(lm.module, x, plan)
    return np.array(flat_floats(r.output_without)), np.array(flat_floats(r.output_with))


def cell(win, path: str, col: int, role=Qt.ItemDataRole.DisplayRole):
    model = win.tree.model
    return model.data(model.index_for_path(path, col), role)


def wait_result(qtbot, win, timeout=30_000):
    qtbot.waitUntil(lambda: win.last_result is not None and win.is_idle(), timeout=timeout)
    return win.last_result


def test_start_shows_exercise_1_with_the_cores_numbers(window):
    r = window.last_result
    assert r.plan.capture == ("0",) and dict(r.plan.clamp) == {"0": (-0.5, 0.5)}
    without, with_ = window.outputs.values()
    ref_without, ref_with = core_outputs("demo:clamp", Plan(clamp={"0": (-0.5, 0.5)}))
    np.testing.assert_allclose(without, ref_without, rtol=0, atol=1e-7)
    np.testing.assert_allclose(with_, ref_with, rtol=0, atol=1e-7)
    assert r.outputs_differ
    # the panel of layer 0 shows the clamped values and the bounds as lines
    panel = window.panel.panels()[("0", 0)]
    assert panel.view_kind == "bars"
    assert panel.record.stats.max <= 0.5 and panel.record.pre_stats.max > 0.5
    assert panel.bounds() == (-0.5, 0.5)
    # the tree shows the same setup
    assert float(cell(window, "0", COL_LO)) == -0.5 and float(cell(window, "0", COL_HI)) == 0.5
    assert cell(window, "0", COL_CAPTURE, Qt.ItemDataRole.CheckStateRole) in (Qt.CheckState.Checked,
                                                                              Qt.CheckState.Checked.value)
    assert window.note.isVisible() and "Exercise 1" in window.note.text()
    assert window.error_text() == ""
    assert "demo:clamp" in window.windowTitle()


def test_key_widgets_have_stable_names(window):
    for name, cls in [("layerTree", QTreeView), ("deviceCombo", QComboBox), ("inputEdit", QLineEdit),
                      ("runButton", QPushButton), ("liveToggle", QWidget),
                      ("activationPanel", QWidget), ("outputComparison", QWidget),
                      ("errorBanner", QWidget)]:
        assert window.findChild(cls, name) is not None, name
    assert window.findChild(QLineEdit, "inputEdit").text() == "example"
    assert window.findChild(QWidget, "liveToggle").isCheckable()


EXPECTED_VIEWS = {
    "clamp": {"0": "bars"},
    "features": {"fc1": "bars", "fc2": "bars", "fc3": "bars"},
    "cnn": {"conv1": "feature_maps", "relu1": "feature_maps", "conv2": "feature_maps", "fc": "bars"},
    "transformer": {"embed": "tokens", "encoder.layers.0.self_attn": "tokens",
                    "encoder.layers.1.linear1": "tokens", "head": "tokens"},
}


@pytest.mark.parametrize("name", sorted(EXPECTED_VIEWS))
def test_each_demo_shows_the_right_panels_and_numbers(make_window, qtbot, name):
    win = make_window([f"demo:{name}"])
    r = wait_result(qtbot, win)
    kinds = {path: p.view_kind for (path, _call), p in win.panel.panels().items()}
    assert kinds == EXPECTED_VIEWS[name]
    without, with_ = win.outputs.values()
    ref_without, ref_with = core_outputs(f"demo:{name}", DEFAULT_PLANS[name])
    np.testing.assert_allclose(without, ref_without, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(with_, ref_with, rtol=1e-6, atol=1e-6)
    assert win.outputs.mode == ("bars" if without.size <= 64 else "lines")
    # shapes reached the tree after the first run
    first = next(iter(EXPECTED_VIEWS[name]))
    qtbot.waitUntil(lambda: bool(cell(win, first, COL_SHAPE)), timeout=10_000)
    assert cell(win, first, COL_SHAPE).replace("×", "x") == "x".join(
        map(str, r.captures[first][0].shape))


def test_features_demo_is_exercise_2(make_window, qtbot):
    win = make_window(["demo:features"])
    r = wait_result(qtbot, win)
    shapes = {p: list(recs[0].shape) for p, recs in r.captures.items()}
    assert shapes == {"fc1": [1, 8], "fc2": [1, 4], "fc3": [1, 2]}
    assert "Exercise 2" in win.note.text()


def test_failing_run_shows_banner_and_next_good_run_clears_it(window, qtbot):
    before_panels = set(window.panel.panels())
    edit = window.findChild(QLineEdit, "inputEdit")
    edit.setText("[[1.0, 2.0]]")  # wrong width for Linear(3, 4)
    with qtbot.waitSignal(window.errorShown, timeout=30_000) as blocker:
        qtbot.mouseClick(window.findChild(QPushButton, "runButton"), Qt.MouseButton.LeftButton)
    assert "forward failed" in blocker.args[0]
    assert window.banner.isVisible() and "forward failed" in window.error_text()
    # nothing the user set up is lost
    assert edit.text() == "[[1.0, 2.0]]"
    assert dict(window.tree.model.plan().clamp) == {"0": (-0.5, 0.5)}
    assert set(window.panel.panels()) == before_panels

    edit.setText("[[1.0, 2.0")  # a syntax error is a message too
    with qtbot.waitSignal(window.errorShown, timeout=30_000) as blocker:
        window.request_run()
    assert "internal error" not in blocker.args[0]

    edit.setText("[[3.0, 2.0, 1.0]]")
    with qtbot.waitSignal(window.resultShown, timeout=30_000):
        qtbot.keyClick(edit, Qt.Key.Key_Return)
    assert window.error_text() == "" and not window.banner.isVisible()
    without, _ = window.outputs.values()
    ref, _ = core_outputs("demo:clamp", Plan(), "[[3.0, 2.0, 1.0]]")
    np.testing.assert_allclose(without, ref, atol=1e-7)


def test_bad_spec_keeps_the_current_model(window, qtbot):
    with qtbot.waitSignal(window.errorShown, timeout=30_000) as blocker:
        window.load("demo:nope")
    assert "unknown demo" in blocker.args[0]
    assert window.loaded.spec == "demo:clamp"
    assert dict(window.tree.model.plan().clamp) == {"0": (-0.5, 0.5)}
    with qtbot.waitSignal(window.resultShown, timeout=30_000):
        window.request_run()


def test_open_another_model_replaces_panels(window, qtbot):
    with qtbot.waitSignal(window.modelLoaded, timeout=30_000):
        window.load("demo:cnn", plan=Plan(capture=("conv1",)))
    r = wait_result(qtbot, window)
    assert set(r.captures) == {"conv1"}
    assert set(window.panel.panels()) == {("conv1", 0)}
    assert window.tree.model.tree().find("conv1") is not None
    assert RecentModels().items()[0] == ("demo:cnn", None)


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
def test_cuda_entry_disabled_with_reason(window):
    combo = window.findChild(QComboBox, "deviceCombo")
    labels = [combo.itemText(i) for i in range(combo.count())]
    assert labels[0] == "CPU" and combo.currentData() == "cpu"
    i = next(i for i in range(combo.count()) if combo.itemData(i) == "cuda")
    flags = combo.model().flags(combo.model().index(i, 0))
    assert not flags & Qt.ItemFlag.ItemIsEnabled
    reason = next(d.reason for d in available_devices() if d.name == "cuda")
    assert reason and reason in combo.itemData(i, Qt.ItemDataRole.ToolTipRole)
    assert not window.run_bar.set_device("cuda")
    assert combo.currentData() == "cpu"
    act = window.actions_.device_actions["cuda"]
    assert not act.isEnabled() and act.toolTip() == reason


def test_menus_and_shortcuts(window, qtbot):
    a = window.actions_
    assert {s.toString() for s in a.run.shortcuts()} == {"Ctrl+R", "F5"}
    assert a.live.shortcut().toString() == "Ctrl+L"
    assert a.open.shortcut().toString() == "Ctrl+O"
    titles = [m.title().replace("&", "") for m in window.menuBar().findChildren(type(a.recent_menu))
              if m.parent() is window.menuBar()]
    assert {"File", "Run", "View", "Help"} <= set(titles)
    window.activateWindow()
    with qtbot.waitSignal(window.resultShown, timeout=30_000):
        QTest.keyClick(window, Qt.Key.Key_R, Qt.KeyboardModifier.ControlModifier)
    QTest.keyClick(window, Qt.Key.Key_L, Qt.KeyboardModifier.ControlModifier)
    assert window.is_live() and window.findChild(QWidget, "liveToggle").isChecked()
    QTest.mouseClick(window.findChild(QWidget, "liveToggle"), Qt.MouseButton.LeftButton)
    assert not window.is_live() and not a.live.isChecked()
    click_view_action(qtbot, window, window.layer_dock.toggleViewAction())
    assert window.layer_dock.isHidden()


def test_status_bar_shows_device_time_memory_runs_in_words(window):
    bar = window.statusBar()
    text = {w.objectName(): w.text() for w in bar.findChildren(QWidget) if w.objectName().startswith("status")}
    assert set(text) == {"statusDevice", "statusTime", "statusMemory", "statusRuns"}
    assert text["statusDevice"] == "device: cpu"
    assert text["statusTime"].startswith("forward: ")
    # Exercise 1 captures layer 0: four float32 values.
    assert text["statusMemory"] == f"captured 1 layer: {window.last_result.captured_bytes} B"
    assert text["statusRuns"].startswith("runs: 1")
    # The benchmark figures are in the tooltip, not in the bar.
    tip = window.status.time.toolTip()
    assert "capture overhead" in tip and "make bench" in tip
    assert not any("overhead" in t for t in text.values())


def test_selecting_a_layer_selects_its_panel(make_window, qtbot):
    win = make_window(["demo:cnn"])
    wait_result(qtbot, win)
    with qtbot.waitSignal(win.tree.layerSelected):
        src = win.tree.model.index_for_path("conv2")
        win.tree.view.setCurrentIndex(win.tree.proxy.mapFromSource(src))
    panels = win.panel.panels()
    assert panels[("conv2", 0)].highlighted and not panels[("conv1", 0)].highlighted
