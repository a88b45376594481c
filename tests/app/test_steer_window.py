"""The window: a steering vector built from two prompts in a dialog (its norm shown), its
strength stepped in Live mode, and receipts with a visible alarm."""

import torch
from PySide6.QtCore import Qt
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QDialog, QDoubleSpinBox

from hookscope.core import Add, Plan, SteeringVector, compare, load_model, parse_input
from hookscope.core.engine.receipts import CHANGED_NOTHING, plan_effect
from hookscope.core.analyses.steer_diff import diff_vector
from hookscope.widgets.intervention_editor import InterventionEditor
from hookscope.widgets.layer_tree_model import COL_INTERVENTION
from support.window_menus import tree_context_menu

PROMPT = "text:the cat sat on the "


def wait_idle(qtbot, win, test=lambda r: True):
    qtbot.waitUntil(lambda: win.last_result is not None and win.is_idle() and test(win.last_result),
                    timeout=30_000)
    return win.last_result


def test_a_vector_from_two_prompts_steers_and_its_alpha_steps_live(make_window, qtbot):
    win = make_window(["demo:lm", "--input", PROMPT, "--live"])
    wait_idle(qtbot, win)
    menu = tree_context_menu(qtbot, win, "blocks.0")
    action = next(a for a in menu.actions() if a.objectName() == "actionSteer")
    QTest.mouseClick(menu, Qt.MouseButton.LeftButton, pos=menu.actionGeometry(action).center())
    qtbot.waitUntil(lambda: win.findChild(QDialog, "steerDialog") is not None)
    dialog = win.findChild(QDialog, "steerDialog")
    qtbot.waitExposed(dialog)
    QTest.keyClicks(dialog.prompt_a, "the cat sat")
    QTest.keyClicks(dialog.prompt_b, "the dog sat")
    dialog.alpha.selectAll()
    QTest.keyClicks(dialog.alpha, "3")
    QTest.mouseClick(dialog.build, Qt.MouseButton.LeftButton)
    spec = "diff:text:the cat sat|text:the dog sat"
    r = wait_idle(qtbot, win, lambda r: isinstance(r.plan.intervention_for("blocks.0"), Add))
    lm = load_model("demo:lm")
    vec = diff_vector(lm.module, "blocks.0", spec, "v", lm.example_input, lm.meaning.codec)
    got = r.plan.intervention_for("blocks.0")
    assert torch.equal(got.vector.values, vec.values) and got.alpha == 3.0
    x = parse_input(PROMPT, lm.example_input, lm.meaning.codec)
    assert torch.equal(r.output_with, compare(lm.module, x, Plan(
        interventions={"blocks.0": Add(vec, 3.0)})).output_with)
    qtbot.waitUntil(lambda: f"{vec.norm:.4g}" in dialog.norm.text())
    receipts = win.outputs.receipts
    assert receipts.text().startswith("blocks.0: fired 1×, 100% changed") and receipts.isVisible()
    assert receipts.toolTip().splitlines() == [r.receipts["blocks.0"].line(), plan_effect(r.receipts)]
    dialog.close()

    # the strength steps in the tree's Intervention cell, and Live re-runs each step
    view, model = win.tree.view, win.tree.model
    idx = win.tree.proxy.mapFromSource(model.index_for_path("blocks.0", COL_INTERVENTION))
    view.scrollTo(idx)
    win.activateWindow()
    view.setFocus()
    qtbot.mouseClick(view.viewport(), Qt.MouseButton.LeftButton, pos=view.visualRect(idx).center())
    qtbot.keyClick(view, Qt.Key.Key_F2)
    qtbot.waitUntil(lambda: view.findChild(InterventionEditor) is not None)
    editor = view.findChild(InterventionEditor)
    spin = editor.findChild(QDoubleSpinBox, "param_alpha")
    for _ in range(4):
        qtbot.keyClick(spin, Qt.Key.Key_Up)
    alpha = spin.value()
    assert alpha > 3.0
    r = wait_idle(qtbot, win, lambda r: r.plan.intervention_for("blocks.0").alpha == alpha)
    assert isinstance(r.plan.intervention_for("blocks.0").vector, (SteeringVector, str))
    assert torch.equal(r.output_with, compare(lm.module, x, Plan(
        interventions={"blocks.0": Add(vec, alpha)})).output_with)


def test_an_intervention_that_changes_nothing_shows_an_alarm(make_window, qtbot):
    win = make_window(["demo:lm", "--input", PROMPT, "--intervene", "blocks.0.attn.probs=clamp:-5:5"])
    r = wait_idle(qtbot, win)
    assert r.receipts["blocks.0.attn.probs"].alarm == CHANGED_NOTHING
    assert not win.banner.isHidden() and CHANGED_NOTHING in win.alarm_text()
    assert win.error_text() == ""  # news about the plan, not a failure
    assert "ALARM" in win.outputs.receipts.text() and CHANGED_NOTHING in win.outputs.receipts.toolTip()


def test_the_receipts_are_whole_under_the_legend_and_the_tooltip_says_the_plans_effect(
        make_window, qtbot):
    from PySide6.QtWidgets import QToolTip

    win = make_window(["demo:lm", "--input", PROMPT, "--intervene", "blocks.0.attn.probs=clamp:-5:5",
                       "--intervene", "blocks.1.mlp=scale:0.2"])
    win.resize(1400, 900)
    r = wait_idle(qtbot, win)
    label = win.outputs.receipts
    qtbot.waitUntil(label.isVisible)
    lines = label.text().splitlines()
    assert lines[0].startswith("blocks.0.attn.probs: fired 1×, 0% changed")
    assert lines[0].endswith("ALARM: changed nothing") and lines[1].startswith("blocks.1.mlp: fired 1×")
    # every word shown: nothing clipped at the dock's edge
    qtbot.waitUntil(lambda: label.height() >= label.heightForWidth(label.width()))
    right = label.mapTo(win.output_dock, label.rect().topRight()).x()
    assert right <= win.output_dock.width()
    # hovering it shows each receipt in full and the whole plan's effect once
    QTest.mouseMove(label, label.rect().center())
    qtbot.waitUntil(QToolTip.isVisible, timeout=5000)
    tip = QToolTip.text().splitlines()
    assert tip == [r.receipts["blocks.0.attn.probs"].line(), r.receipts["blocks.1.mlp"].line(),
                   plan_effect(r.receipts)]
    assert sum("output" in line for line in tip) == 1
