"""The tree's Intervention cell editor fits the tree: at every width a person's window
gives the tree, each kind's fields lie side by side or wrap onto further rows, never on
top of each other, and a click on the last field types into it. In the window (a
person's window is active: the click gives the field the focus)."""

from __future__ import annotations

import pytest
from PySide6.QtCore import QRect, Qt
from PySide6.QtWidgets import QAbstractSpinBox, QComboBox, QLineEdit, QWidget

from hookscope.core import kinds
from hookscope.widgets.intervention_editor import InterventionEditor
from hookscope.widgets.layer_tree_model import COL_INTERVENTION

LAYER = "blocks.1"
#: per kind: the fields clicked and typed into, in order (the last one: hi, or the last
#: number or text), each with what is typed and the value the plan then holds
TYPED = {
    "clamp": [("hi", "2.5", 2.5)],
    "scale": [("factor", "0.25", 0.25)],
    "add": [("vector", "v", "v"), ("alpha", "3", 3.0)],
    "patch": [("source_input", "zeros", "zeros")],
    "zero": [("dim", "-1", -1)],
}


def open_editor(qtbot, win, path: str) -> InterventionEditor:
    """The Intervention cell of ``path``: clicked, F2 (as a person opens it)."""
    w = win.tree
    view = w.view
    win.activateWindow()
    idx = w.proxy.mapFromSource(w.model.index_for_path(path, COL_INTERVENTION))
    view.scrollTo(idx)
    qtbot.mouseClick(view.viewport(), Qt.MouseButton.LeftButton, pos=view.visualRect(idx).center())
    qtbot.waitUntil(lambda: view.currentIndex() == idx)
    qtbot.keyClick(view, Qt.Key.Key_F2)
    qtbot.waitUntil(lambda: view.findChild(InterventionEditor) is not None)
    editor = view.findChild(InterventionEditor)
    assert editor is not None
    return editor


def fields(editor: InterventionEditor) -> dict[str, QRect]:
    """Every shown field of the editor (the kind chooser, each label and input) in editor px."""
    out = {}
    for child in editor.findChildren(QWidget):
        if child.isVisible() and (isinstance(child, (QComboBox, QLineEdit, QAbstractSpinBox))
                                  or type(child).__name__ == "QLabel"):
            if isinstance(child, QLineEdit) and isinstance(child.parentWidget(), (QAbstractSpinBox,
                                                                                  QComboBox)):
                continue   # a spin box's or combo's own line
            name = child.objectName() or f"label:{child.text()}"  # type: ignore[attr-defined]
            out[name] = QRect(child.mapTo(editor, child.rect().topLeft()), child.size())
    return out


#: (window width, height, the tree's width): the smallest window's tree as it comes (~340
#: px, its viewport ~320; the docks' least widths keep it from narrowing further), the
#: default window's, a dock a person widened
SIZES = [(1000, 650, None), (1200, 800, 392), (1600, 900, 700)]


def tree_at(qtbot, make_window, width: int, height: int, tree: int | None):
    """demo:lm's window at ``width``×``height``, its tree dock dragged to ``tree`` px
    (``None``: as the window lays it out)."""
    win = make_window(["demo:lm"])
    win.resize(width, height)
    qtbot.waitUntil(lambda: win.is_idle() and win.tree.model.tree() is not None, timeout=30_000)
    if tree is None:
        qtbot.waitUntil(lambda: win.tree.view.viewport().width() <= 340)
        return win
    win.resizeDocks([win.layer_dock], [tree], Qt.Orientation.Horizontal)
    qtbot.waitUntil(lambda: abs(win.tree.width() - tree) <= 12)
    return win


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("kind", sorted(TYPED))
def test_each_kinds_fields_lie_apart_and_take_a_click(qtbot, make_window, kind, size):
    win = tree_at(qtbot, make_window, *size)
    w = win.tree
    editor = open_editor(qtbot, win, LAYER)
    qtbot.keyClicks(editor.kind_combo, kind)
    assert editor.kind_combo.currentText() == kind
    qtbot.waitUntil(lambda: len(editor.findChildren(QWidget, "param_at")) == 1
                    and editor.findChild(QWidget, "param_at").isVisible())
    shown = fields(editor)
    params = {p.name for p in kinds()[kind].params()} | {"at"}
    assert {f"param_{p}" for p in params} <= set(shown), shown
    viewport = w.view.viewport()
    for a, ra in shown.items():
        assert ra.width() >= 40 or a.startswith("label:"), (a, ra)
        # whole inside the tree, not cut by its right or bottom edge
        at = QRect(editor.mapTo(viewport, ra.topLeft()), ra.size())
        assert viewport.rect().contains(at), (a, at, viewport.rect())
        for b, rb in shown.items():
            assert a == b or not ra.intersects(rb), (a, ra, b, rb)
    for name, text, _want in TYPED[kind]:
        field = editor.findChild(QWidget, f"param_{name}")
        # clicked at its centre: the click lands on this field, no other lies over it
        qtbot.mouseClick(field, Qt.MouseButton.LeftButton)
        qtbot.waitUntil(lambda: field.hasFocus() or field.isAncestorOf(editor.focusWidget()))
        qtbot.keyClick(editor.focusWidget(), Qt.Key.Key_A, Qt.KeyboardModifier.ControlModifier)
        qtbot.keyClicks(editor.focusWidget(), text)
    qtbot.keyClick(editor.focusWidget(), Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: LAYER in w.model.plan().interventions)
    iv = w.model.plan().interventions[LAYER]
    assert iv.name == kind
    assert {name: iv.values()[name] for name, _t, _w in TYPED[kind]} == {
        name: want for name, _t, want in TYPED[kind]}
