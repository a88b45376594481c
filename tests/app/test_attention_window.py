"""View → Attention: hidden until asked for; shown, every run brings each head's maps (the
numbers Session.attention gives for the same model, input and plan), and a click on a head
selects its attention module and aims the layer's intervention at that head."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QAction
from PySide6.QtTest import QTest

from hookscope.core import At, Clamp, Session, Zero
from hookscope.widgets.attention_view import AttentionView, shown
from tests.support.screenshots import wanted, save_shot
from tests.support.window_menus import click_view_action


def open_attention(win, qtbot):
    view_menu = [a.menu() for a in win.menuBar().actions() if a.text() == "&View"][0]
    win.activateWindow()
    QTest.keyClick(win, Qt.Key.Key_V, Qt.KeyboardModifier.AltModifier)
    qtbot.waitUntil(view_menu.isVisible)
    toggle = win.findChild(QAction, "actionViewAttention")
    QTest.mouseClick(view_menu, Qt.MouseButton.LeftButton,
                     pos=view_menu.actionGeometry(toggle).center())
    dock = win.findChild(type(win.lens_dock), "attentionDock")
    qtbot.waitUntil(dock.isVisible)
    return dock, win.findChild(AttentionView)


def shown_patterns(win, qtbot):
    qtbot.waitUntil(lambda: win.last_result is not None and win.is_idle()
                    and "attention" in win.last_result.extras, timeout=60_000)
    return win.last_result.extras["attention"]


def session_patterns(spec, prompt, layer, iv, layers):
    s = Session.load(spec, input_text=prompt)
    try:
        s.intervene(layer, iv)
        return s.attention(*layers)
    finally:
        s.close()


def check_window(win, qtbot, spec, prompt, upstream, iv, layer, tmp_shots=None):
    qtbot.waitUntil(lambda: win.last_result is not None and win.is_idle(), timeout=60_000)
    assert "attention" not in win.last_result.extras and not win.error_text()
    dock, view = open_attention(win, qtbot)
    got = shown_patterns(win, qtbot)
    assert layer in got.layers
    ref = session_patterns(spec, prompt, upstream, iv, list(got.layers))
    view.layer.setCurrentText(layer)
    qtbot.waitUntil(lambda: view.layer.currentText() == layer)
    a = ref[layer]
    # The maps drawn are Session.attention's numbers (another session, the same computation:
    # within float rounding), with the upstream clamp changing them.
    assert len(view.images) == a.heads
    for h in range(a.heads):
        np.testing.assert_allclose(view.images[h].image, a.with_[0, h].double().numpy(),
                                   rtol=1e-5, atol=1e-6)
    assert not np.allclose(a.with_[0].double().numpy(), a.without[0].double().numpy())
    return dock, view, ref


def click_head(win, qtbot, view, head):
    g = view.graphics
    qtbot.waitExposed(g)
    qtbot.waitUntil(lambda: view.plots[head].vb.sceneBoundingRect().width() > 10)
    QTest.mouseClick(g.viewport(), Qt.MouseButton.LeftButton,
                     pos=g.mapFromScene(view.cell_center(head, 1, 0)))


def test_attention_dock_on_demo_lm(make_window, qtbot):
    prompt = "text:the cat sat on the "
    win = make_window(["demo:lm", "--input", prompt, "--intervene", "blocks.0=clamp:-0.1:0.1"])
    layer = "blocks.1.attn"
    _dock, view, _ref = check_window(win, qtbot, "demo:lm", prompt, "blocks.0", Clamp(-0.1, 0.1),
                                  layer)
    # A click on head 2: the layer is selected and a head ablation aimed at head 2.
    click_head(win, qtbot, view, 2)
    qtbot.waitUntil(lambda: win.session.current_plan().all_interventions().get(layer)
                    == Zero(at=At(heads=(2,))))
    assert win.tree.selected_path() == layer
    # A second click keeps the kind and moves its heads.
    click_head(win, qtbot, view, 0)
    qtbot.waitUntil(lambda: win.session.current_plan().all_interventions().get(layer)
                    == Zero(at=At(heads=(0,))))
    assert win.session.current_plan().all_interventions()["blocks.0"] == Clamp(-0.1, 0.1)
    # Hidden again, runs stop computing it.
    click_view_action(qtbot, win, "actionViewAttention")
    assert "attention" not in win.session.derived


def test_attention_dock_on_gpt2_and_a_click_on_a_head(make_window, qtbot, tmp_path):
    pytest.importorskip("transformers", reason="the hf extra (transformers) is not installed")
    sys.path.insert(0, str(Path(__file__).parents[1] / "core"))
    import hf_models

    spec = f"hf:{hf_models.gpt2(tmp_path / 'g')}"
    prompt = "text:the cat sat on the mat"
    layer = "transformer.h.1.attn"
    win = make_window([spec, "--input", prompt, "--intervene", "transformer.h.0=clamp:0:0.01",
                       "--intervene", f"{layer}=scale:0.5"])
    _dock, view, ref = check_window(win, qtbot, spec, prompt, "transformer.h.0", Clamp(0, 0.01),
                                  layer)
    labels = view.plots[0].getAxis("bottom").labels
    assert labels == [shown(t) for t in ref.tokens] and len(labels) == ref[layer].with_.shape[-1]
    before = win.session.current_plan().all_interventions()[layer]
    click_head(win, qtbot, view, 1)
    qtbot.waitUntil(lambda: win.session.current_plan().all_interventions()[layer].where()
                    == At(heads=(1,)))
    after = win.session.current_plan().all_interventions()[layer]
    assert after.name == before.name == "scale" and after.factor == before.factor
    assert win.tree.selected_path() == layer
    panel = win.intervention_panel
    qtbot.waitUntil(lambda: panel.path() == layer and panel.head_grid.heads() == [1])
    if wanted():
        for w, h in ((1400, 900), (2560, 1440)):
            win.resize(w, h)
            qtbot.waitUntil(lambda: win.width() == w)
            qtbot.wait(300)
            save_shot(win, f"attention_gpt2_{w}x{h}")


def test_a_model_without_attention_says_so_in_the_dock(make_window, qtbot):
    win = make_window(["demo:cnn"])
    qtbot.waitUntil(lambda: win.last_result is not None and win.is_idle(), timeout=60_000)
    dock, view = open_attention(win, qtbot)
    note = dock.findChild(type(view.readout), "attentionNote")
    assert "no attention module" in note.text()
    assert "attention" not in win.session.derived and not view.images
    assert not win.error_text()
