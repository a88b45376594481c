"""What the tree tests share: a tree widget over a loaded model, and the rows it shows."""

from __future__ import annotations

from PySide6.QtCore import QModelIndex

from hookscope.core import load_model, module_tree, observe
from hookscope.widgets.layer_tree_view import LayerTreeWidget


def tree_widget(qtbot, spec: str = "demo:transformer") -> LayerTreeWidget:
    """A tree widget over ``spec``'s module tree, shapes observed on its example input."""
    lm = load_model(spec)
    w = LayerTreeWidget()
    qtbot.addWidget(w)
    w.model.set_tree(observe(lm.module, lm.example_input, module_tree(lm.module)))
    return w


def visible_paths(w: LayerTreeWidget) -> list[str]:
    """The layer paths of the rows the filter lets through, depth first."""
    out = []

    def walk(parent):
        for r in range(w.proxy.rowCount(parent)):
            idx = w.proxy.index(r, 0, parent)
            out.append(w.model.path_for_index(w.proxy.mapToSource(idx)))
            walk(idx)

    walk(QModelIndex())
    return out
