"""A prompt's trailing space is a token, wherever the prompt is typed or read: ``--vector``
on the command line, the Intervention panel's patch source, the sweep dock's template, a
session file's patch source and ``diff:`` vector. Each is checked against hand-written hooks
on the token ids of the prompt as typed (demo:lm's tokenizer is one token per character, so
``"the dog sat on the "`` is 19 ids ending in the space's)."""

from __future__ import annotations

import json

import pytest
import torch
from PySide6.QtCore import QPoint, Qt
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QLineEdit

from hookscope.app.cli import main
from hookscope.core import Patch, Session, load_model
from hookscope.core.demos.demo_lm import ALPHABET
from hookscope.widgets.layer_tree_model import COL_LAYER
from support.window_menus import click_view_action

PROMPT = "text:the cat sat on the "
A, B = "the dog sat on the ", "the cat sat on the "
LAYER = "blocks.0"
#: a hand hook and the CLI's forward differ only in float rounding (double reductions)
TOL = dict(rtol=1e-5, atol=1e-5)


def ids(prompt: str) -> torch.Tensor:
    """Token ids of ``prompt`` by hand: one per character of demo:lm's alphabet."""
    out = torch.tensor([[ALPHABET.index(c) for c in prompt]])
    assert out[0, -1] == ALPHABET.index(" ")  # the trailing space is a token
    return out


def output_of(module, x):
    got = []
    handle = module.get_submodule(LAYER).register_forward_hook(lambda m, a, o: got.append(o))
    with torch.inference_mode():
        module(x)
    handle.remove()
    return got[0]


def with_hook(module, x, change):
    handle = module.get_submodule(LAYER).register_forward_hook(lambda m, a, o: change(o))
    with torch.inference_mode():
        out = module(x)
    handle.remove()
    return out


def hand_vector(module):
    va, vb = (output_of(module, ids(p))[0, -1].double() for p in (A, B))
    return (va - vb).float()


def test_cli_vector_keeps_prompt_b_trailing_space(capsys):
    code = main(["run", "demo:lm", "--input", PROMPT, "--vector", f"v=diff:text:{A}|text:{B}",
                 "--intervene", f"{LAYER}=add:v:4", "--json"])
    out, err = capsys.readouterr()
    assert code == 0 and err == "", err
    lm = load_model("demo:lm")
    x = ids(PROMPT.removeprefix("text:"))
    vec = hand_vector(lm.module)
    want = with_hook(lm.module, x, lambda o: o + 4 * vec)
    base = with_hook(lm.module, x, lambda o: o)
    assert json.loads(out)["max_abs_diff"] == pytest.approx((want - base).abs().max().item(), rel=1e-4)


def test_session_file_keeps_a_patch_source_and_a_vector_byte_for_byte(tmp_path):
    lm = load_model("demo:lm")
    x = ids(PROMPT.removeprefix("text:"))
    source = output_of(lm.module, ids(A))
    vec = hand_vector(lm.module)
    cases = {
        "patch": ({"kind": "patch", "source_input": f"text:{A}"}, lambda o: source.clone()),
        "add": ({"kind": "add", "vector": f"diff:text:{A}|text:{B}", "alpha": 3.0},
                lambda o: o + 3 * vec),
    }
    for name, (iv, change) in cases.items():
        path = tmp_path / f"{name}.hookscope.json"
        path.write_text(json.dumps({"format": "hookscope-session", "version": 1,
                                    "model": {"spec": "demo:lm"}, "input": {"text": PROMPT},
                                    "plan": {"interventions": {LAYER: iv}}}), encoding="utf-8")
        s = Session.open_file(path, timeout_s=60)
        try:
            r = s.run(timeout_s=60)
        finally:
            s.close()
        assert torch.allclose(r.output_with, with_hook(lm.module, x, change), **TOL), name


def _wait_idle(qtbot, win, test=lambda r: True):
    qtbot.waitUntil(lambda: win.last_result is not None and win.is_idle() and test(win.last_result),
                    timeout=30_000)
    return win.last_result


def _type(field, text):
    field.setFocus()
    QTest.keyClick(field, Qt.Key.Key_A, Qt.KeyboardModifier.ControlModifier)
    QTest.keyClicks(field, text)


def test_panel_patch_source_keeps_its_trailing_space_and_its_last_token_patches(make_window, qtbot):
    win = make_window(["demo:lm", "--input", PROMPT, "--live"])
    _wait_idle(qtbot, win)
    w = win.tree
    idx = w.proxy.mapFromSource(w.model.index_for_path(LAYER, COL_LAYER))
    w.view.scrollTo(idx)
    rect = w.view.visualRect(idx)
    QTest.mouseClick(w.view.viewport(), Qt.MouseButton.LeftButton,
                     pos=QPoint(rect.left() + 12, rect.center().y()))
    panel = win.intervention_panel
    qtbot.waitUntil(lambda: panel.path() == LAYER)
    win.intervention_dock.raise_()
    qtbot.waitUntil(panel.isVisible)
    QTest.mouseClick(panel.kind_combo, Qt.MouseButton.LeftButton)
    QTest.keyClicks(panel.kind_combo.view(), "patch")
    QTest.keyClick(panel.kind_combo.view(), Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: panel.findChild(QLineEdit, "panel_source_input") is not None)
    field = panel.findChild(QLineEdit, "panel_source_input")
    _type(field, f"text:{A}")
    QTest.keyClick(field, Qt.Key.Key_Return)
    strip = panel.token_strip
    last = strip.count() - 1
    assert last == len(A) - 1
    QTest.mouseClick(strip.viewport(), Qt.MouseButton.LeftButton, pos=strip.token_rect_center(last))
    r = _wait_idle(qtbot, win, lambda r: isinstance(r.plan.intervention_for(LAYER), Patch)
                   and r.plan.intervention_for(LAYER).at is not None)
    iv = r.plan.intervention_for(LAYER)
    assert iv.source_input == f"text:{A}" and "out of range" not in win.error_text()
    lm = load_model("demo:lm")
    source = output_of(lm.module, ids(A))

    def patch_last(o):
        o = o.clone()
        o[:, last] = source[:, last]
        return o

    want = with_hook(lm.module, ids(PROMPT.removeprefix("text:")), patch_last)
    assert torch.allclose(r.output_with, want, **TOL)


def test_sweep_dock_template_keeps_its_prompt(make_window, qtbot):
    win = make_window(["demo:lm", "--input", PROMPT])
    _wait_idle(qtbot, win)
    click_view_action(qtbot, win, "actionViewSweep")
    qtbot.waitUntil(win.sweep_dock.isVisible)
    view = win.sweep_view
    _type(view.axes, "layer=blocks.0")
    _type(view.template, f"{{layer}}=patch:text:{A}")  # the prompt ends the template
    combo = view.metric_box.kind  # the metric: the largest |change| of the output
    combo.setFocus()
    QTest.keyClick(combo, Qt.Key.Key_Home)
    while combo.currentText() != "max-abs-diff" and combo.currentIndex() < combo.count() - 1:
        QTest.keyClick(combo, Qt.Key.Key_Down)
    assert view.metric_box.text() == "max-abs-diff"
    QTest.mouseClick(view.run_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: (view.result is not None or bool(win.error_text()))
                    and view.run_button.isEnabled(), timeout=60_000)
    got = view.result
    assert got is not None, win.error_text()
    assert got.plan_of(layer=LAYER).interventions[LAYER].source_input == f"text:{A}"
    lm = load_model("demo:lm")
    x = ids(PROMPT.removeprefix("text:"))
    source = output_of(lm.module, ids(A))
    want = (with_hook(lm.module, x, lambda o: source.clone()) - with_hook(lm.module, x, lambda o: o))
    assert got.values.reshape(-1)[0] == pytest.approx(want.abs().max().item(), rel=1e-4)


def test_cell_editor_patch_source_keeps_its_trailing_space(make_window, qtbot, capsys):
    """The tree's Intervention cell: ``@pos=-1`` puts the source's last token (its trailing
    space) into the target's last token, as ``--intervene 'blocks.0=patch:text:...@pos=-1'``
    does."""
    from hookscope.widgets.intervention_editor import InterventionEditor
    from hookscope.widgets.layer_tree_model import COL_INTERVENTION

    win = make_window(["demo:lm", "--input", PROMPT, "--live"])
    _wait_idle(qtbot, win)
    view, model = win.tree.view, win.tree.model
    idx = win.tree.proxy.mapFromSource(model.index_for_path(LAYER, COL_INTERVENTION))
    view.scrollTo(idx)
    qtbot.mouseClick(view.viewport(), Qt.MouseButton.LeftButton, pos=view.visualRect(idx).center())
    qtbot.keyClick(view, Qt.Key.Key_F2)
    qtbot.waitUntil(lambda: view.findChild(InterventionEditor) is not None)
    editor = view.findChild(InterventionEditor)
    qtbot.keyClicks(editor.kind_combo, "patch")
    source = editor.findChild(QLineEdit, "param_source_input")
    at = editor.findChild(QLineEdit, "param_at")
    qtbot.mouseClick(at, Qt.MouseButton.LeftButton)
    qtbot.keyClicks(at, "@pos=-1")
    qtbot.mouseClick(source, Qt.MouseButton.LeftButton)
    qtbot.keyClicks(source, f"text:{A}")
    qtbot.keyClick(source, Qt.Key.Key_Return)
    r = _wait_idle(qtbot, win, lambda r: isinstance(r.plan.intervention_for(LAYER), Patch))
    assert r.plan.intervention_for(LAYER).source_input == f"text:{A}"
    lm = load_model("demo:lm")
    src = output_of(lm.module, ids(A))

    def patch_last(o):
        o = o.clone()
        o[:, -1] = src[:, -1]  # the source's last token is its trailing space
        return o

    want = with_hook(lm.module, ids(PROMPT.removeprefix("text:")), patch_last)
    assert torch.allclose(r.output_with, want, **TOL)
    capsys.readouterr()
    assert main(["run", "demo:lm", "--input", PROMPT, "--intervene",
                 f"{LAYER}=patch:text:{A}@pos=-1", "--json"]) == 0  # the CLI patches the same
    assert json.loads(capsys.readouterr().out)["max_abs_diff"] == pytest.approx(
        (r.output_with - r.output_without).abs().max().item(), rel=1e-5)
