"""The tree filter takes the same layer patterns as --capture; long names elide in the middle."""

from __future__ import annotations

from PySide6.QtCore import Qt

from hookscope.core import load_model, module_tree
from hookscope.core.path_patterns import expand_paths
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
