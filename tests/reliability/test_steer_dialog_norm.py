"""The steering dialog always ends its "computing…" line: with the vector's norm when the
run built it (prompt B ending in a space, the same prompts built twice in Live mode), or
with the reason when the run failed."""

from __future__ import annotations

import torch
from PySide6.QtCore import Qt
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QDialog

from hookscope.core import load_model
from hookscope.core.analyses.steer_diff import diff_vector
from support.window_menus import tree_context_menu

PROMPT = "text:the cat sat on the "


def wait_idle(qtbot, win):
    qtbot.waitUntil(lambda: win.last_result is not None and win.is_idle(), timeout=30_000)


def typed_dialog(qtbot, win, path, a, b):
    """The tree's context menu → Steer… on ``path``, the two prompts typed."""
    wait_idle(qtbot, win)
    menu = tree_context_menu(qtbot, win, path)
    action = next(a for a in menu.actions() if a.objectName() == "actionSteer")
    QTest.mouseClick(menu, Qt.MouseButton.LeftButton, pos=menu.actionGeometry(action).center())
    qtbot.waitUntil(lambda: win.findChild(QDialog, "steerDialog") is not None)
    dialog = win.findChild(QDialog, "steerDialog")
    qtbot.waitExposed(dialog)
    QTest.keyClicks(dialog.prompt_a, a)
    QTest.keyClicks(dialog.prompt_b, b)
    return dialog


def reference_norm(path, a, b):
    lm = load_model("demo:lm")
    spec = f"diff:text:{a}|text:{b}"
    return diff_vector(lm.module, path, spec, "v", lm.example_input, lm.meaning.codec)


def test_a_prompt_ending_in_a_space_gets_its_norm(make_window, qtbot):
    win = make_window(["demo:lm", "--input", PROMPT])
    dialog = typed_dialog(qtbot, win, "blocks.0", "the dog sat on the ", "the cat sat on the ")
    QTest.mouseClick(dialog.build, Qt.MouseButton.LeftButton)
    vec = reference_norm("blocks.0", "the dog sat on the ", "the cat sat on the ")
    qtbot.waitUntil(lambda: f"{vec.norm:.4g}" in dialog.norm.text(), timeout=30_000)
    got = win.last_result.plan.intervention_for("blocks.0").vector
    assert torch.equal(got.values, vec.values)


def test_building_the_same_vector_again_in_live_mode_shows_its_norm(make_window, qtbot):
    win = make_window(["demo:lm", "--input", PROMPT, "--live"])
    dialog = typed_dialog(qtbot, win, "blocks.0", "the dog", "the cat")
    vec = reference_norm("blocks.0", "the dog", "the cat")
    QTest.mouseClick(dialog.build, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: f"{vec.norm:.4g}" in dialog.norm.text(), timeout=30_000)
    wait_idle(qtbot, win)
    QTest.mouseClick(dialog.build, Qt.MouseButton.LeftButton)  # nothing changed: no new run
    qtbot.waitUntil(lambda: f"{vec.norm:.4g}" in dialog.norm.text(), timeout=30_000)


def test_a_run_that_fails_says_why_in_the_dialog(make_window, qtbot):
    win = make_window(["demo:lm", "--input", PROMPT])
    # demo:lm reads at most 64 characters: a longer prompt B fails the vector's forward
    dialog = typed_dialog(qtbot, win, "blocks.0", "the dog", "the cat " * 9)
    QTest.mouseClick(dialog.build, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: "computing" not in dialog.norm.text(), timeout=30_000)
    assert "norm |v|" not in dialog.norm.text() and dialog.norm.text() == win.error_text().split("\n")[0]
