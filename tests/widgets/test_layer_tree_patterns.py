"""The tree filter takes the same layer patterns as --capture; long names elide in the middle."""

from __future__ import annotations

from PySide6.QtCore import Qt

from hookscope.core import load_model, module_tree
from hookscope.core.plan.path_patterns import expand_paths
from hookscope.widgets.layer_tree_view import LayerTreeWidget

from tree_helpers import visible_paths as _visible


def test_typed_wildcard_keeps_the_matching_layers_and_their_ancestors(qtbot):
    lm = load_model("demo:lm")
    w = LayerTreeWidget()
    qtbot.addWidget(w)
    w.model.set_tree(module_tree(lm.module))
    qtbot.keyClicks(w.filter_edit, "blocks.*.mlp")
    shown = _visible(w)
    want = expand_paths("blocks.*.mlp", lm.module)
    assert want == ["blocks.0.mlp", "blocks.1.mlp"]
    assert set(want) <= set(shown) and "blocks.0.attn" not in shown and "blocks.0" in shown
    assert w.view.textElideMode() == Qt.TextElideMode.ElideMiddle


def _wrapped_lm(qtbot) -> LayerTreeWidget:
    """demo:lm one level down, as a Hugging Face model keeps its blocks (transformer.h.N)."""
    from torch import nn

    w = LayerTreeWidget()
    qtbot.addWidget(w)
    w.model.set_tree(module_tree(nn.ModuleDict({"transformer": load_model("demo:lm").module})))
    w.resize(420, 600)
    w.show()
    qtbot.waitExposed(w)
    return w


def test_a_pattern_from_one_level_down_matches_at_any_depth_and_says_so(qtbot):
    from PySide6.QtTest import QTest

    w = _wrapped_lm(qtbot)
    qtbot.keyClicks(w.filter_edit, "blocks.*.mlp")
    shown = _visible(w)
    assert "transformer.blocks.0.mlp" in shown and "transformer.blocks.1.mlp" in shown
    assert "transformer.blocks.0.attn" not in shown
    assert w.filter_note.isVisible() and "transformer.blocks.*.mlp" in w.filter_note.text()
    # Enter in the filter captures every match, and only the matches
    QTest.keyClick(w.filter_edit, Qt.Key.Key_Return)
    assert w.model.plan().capture == ("transformer.blocks.0.mlp", "transformer.blocks.1.mlp")
    # a pattern that fits nowhere says how patterns read, with a real path
    w.filter_edit.clear()
    qtbot.keyClicks(w.filter_edit, "h.*.nothing")
    assert not w.filter_note.isVisible() and w.empty_hint.isVisible()
    assert "transformer." in w.empty_hint.text()


def test_the_capture_all_matching_button_ticks_every_match_with_one_click(qtbot):
    from PySide6.QtTest import QTest

    w = _wrapped_lm(qtbot)
    assert not w.capture_button.isVisible()
    qtbot.keyClicks(w.filter_edit, "transformer.blocks.*.attn.probs")
    assert w.capture_button.isVisible() and "2" in w.capture_button.text()
    QTest.mouseClick(w.capture_button, Qt.MouseButton.LeftButton)
    assert w.model.plan().capture == ("transformer.blocks.0.attn.probs",
                                      "transformer.blocks.1.attn.probs")
    w.model.session.undo()   # one undo step for the lot
    assert w.model.plan().capture == ()
