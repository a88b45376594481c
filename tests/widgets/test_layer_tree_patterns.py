"""The tree filter takes the same layer patterns as --capture; long names elide in the middle."""

from __future__ import annotations

from PySide6.QtCore import QModelIndex, Qt

from hookscope.core import load_model, module_tree
from hookscope.core.path_patterns import expand_paths
from hookscope.widgets.layer_tree_view import LayerTreeWidget


def _visible(w: LayerTreeWidget) -> list[str]:
    out = []

    def walk(parent):
        for r in range(w.proxy.rowCount(parent)):
            idx = w.proxy.index(r, 0, parent)
            out.append(w.model.path_for_index(w.proxy.mapToSource(idx)))
            walk(idx)

    walk(QModelIndex())
    return out


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
