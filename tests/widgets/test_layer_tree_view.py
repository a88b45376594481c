"""The tree widget: filter box, selection signal, programmatic selection."""

from __future__ import annotations

from PySide6.QtCore import QItemSelectionModel, Qt

from hookscope.core import Clamp, load_model, module_tree, observe

from tree_helpers import tree_widget as _widget
from tree_helpers import visible_paths as _visible_paths


def test_object_names(qtbot):
    w = _widget(qtbot)
    assert w.view.objectName() == "layerTree"
    assert w.filter_edit.objectName() == "layerFilter"
    assert w.filter_edit.placeholderText() == "Filter layers by name or type"


def test_filter_narrows_rows_by_name_and_type(qtbot):
    w = _widget(qtbot)
    everything = _visible_paths(w)
    w.set_filter("linear1")
    shown = _visible_paths(w)
    assert len(shown) < len(everything)
    assert "encoder.layers.0.linear1" in shown and "encoder.layers.1.linear1" in shown
    assert "encoder.layers.0.norm1" not in shown and "head" not in shown
    # Ancestors stay so the matches are reachable.
    assert "encoder.layers.0" in shown
    w.set_filter("layernorm")  # by type, any case
    shown = _visible_paths(w)
    assert "norm" in shown and "encoder.layers.0.norm2" in shown and "embed" not in shown
    w.set_filter("")
    assert _visible_paths(w) == everything


def test_user_selection_emits_layer_selected(qtbot):
    w = _widget(qtbot, "demo:cnn")
    idx = w.proxy.mapFromSource(w.model.index_for_path("conv2"))
    with qtbot.waitSignal(w.layerSelected) as sig:
        w.view.selectionModel().select(idx, QItemSelectionModel.SelectionFlag.ClearAndSelect
                                       | QItemSelectionModel.SelectionFlag.Rows)
    assert sig.args == ["conv2"]


def test_select_path_is_quiet(qtbot):
    w = _widget(qtbot, "demo:cnn")
    with qtbot.assertNotEmitted(w.layerSelected):
        assert w.select_path("fc")
    assert w.selected_path() == "fc"
    assert not w.select_path("nope")


def test_a_filter_that_matches_nothing_says_so(qtbot):
    w = _widget(qtbot, "demo:cnn")
    w.resize(400, 300)
    w.show()
    qtbot.waitExposed(w)
    hint = w.findChild(type(w.empty_hint), "layerFilterEmpty")
    assert hint is not None and not hint.isVisible()
    w.set_filter("xyz")
    assert _visible_paths(w) == []
    assert hint.isVisible() and hint.text() == "no layer matches ‘xyz’"
    assert hint.geometry().intersects(w.view.viewport().rect())
    w.set_filter("conv")
    assert not hint.isVisible()
    w.set_filter("")
    assert not hint.isVisible()
    # Another model under the same filter: the hint follows it.
    w.set_filter("embed")
    assert hint.isVisible()
    lm = load_model("demo:transformer")
    w.model.set_tree(observe(lm.module, lm.example_input, module_tree(lm.module)))
    assert not hint.isVisible()


def _click_check(qtbot, w, path):
    from PySide6.QtCore import QPoint
    from PySide6.QtTest import QTest

    from hookscope.widgets.layer_tree_model import COL_CAPTURE

    cell = w.view.visualRect(w.proxy.mapFromSource(w.model.index_for_path(path, COL_CAPTURE)))
    QTest.mouseClick(w.view.viewport(), Qt.MouseButton.LeftButton,
                     pos=QPoint(cell.left() + 10, cell.center().y()))


def test_ticking_a_block_captures_that_row_only_and_children_show_apart(qtbot):
    # Capturing a block's output and capturing what is inside it are two wishes:
    # a tick is the row; a row with captured layers inside is partly ticked, a
    # row captured itself is ticked, and the context menu captures the children.
    from PySide6.QtCore import QPoint
    from PySide6.QtTest import QTest

    from hookscope.widgets.layer_tree_model import COL_CAPTURE, COL_LAYER

    w = _widget(qtbot, "demo:lm")
    w.resize(500, 700)
    w.show()
    qtbot.waitExposed(w)
    check = lambda p: w.model.index_for_path(p, COL_CAPTURE).data(Qt.ItemDataRole.CheckStateRole)
    _click_check(qtbot, w, "blocks.0.mlp")
    assert w.model.plan().capture == ("blocks.0.mlp",)
    assert check("blocks.0.mlp") == Qt.CheckState.Checked
    assert check("blocks.0") == Qt.CheckState.PartiallyChecked  # a layer inside is captured
    assert check("blocks.0.mlp.0") == Qt.CheckState.Unchecked
    tip = w.model.index_for_path("blocks.0", COL_CAPTURE).data(Qt.ItemDataRole.ToolTipRole)
    assert "1 layer inside it captured" in tip
    # ticking the partly ticked parent captures it alone: now ticked, not partly
    _click_check(qtbot, w, "blocks.0")
    assert set(w.model.plan().capture) == {"blocks.0", "blocks.0.mlp"}
    assert check("blocks.0") == Qt.CheckState.Checked
    # right-click blocks.1.mlp → Capture children: its three layers, not itself
    rect = w.view.visualRect(w.proxy.mapFromSource(w.model.index_for_path("blocks.1.mlp", COL_LAYER)))
    pos = QPoint(rect.left() + 20, rect.center().y())
    QTest.mouseClick(w.view.viewport(), Qt.MouseButton.RightButton, pos=pos)  # selects the row
    from PySide6.QtGui import QContextMenuEvent
    from PySide6.QtWidgets import QApplication

    QApplication.sendEvent(w.view.viewport(), QContextMenuEvent(
        QContextMenuEvent.Reason.Mouse, pos, w.view.viewport().mapToGlobal(pos)))
    qtbot.waitUntil(lambda: w.menu is not None and w.menu.isVisible())
    action = next(a for a in w.menu.actions() if a.text() == "Capture children")
    QTest.mouseClick(w.menu, Qt.MouseButton.LeftButton, pos=w.menu.actionGeometry(action).center())
    inside = {"blocks.1.mlp.0", "blocks.1.mlp.1", "blocks.1.mlp.2"}
    qtbot.waitUntil(lambda: inside <= set(w.model.plan().capture))
    assert "blocks.1.mlp" not in w.model.plan().capture
    assert check("blocks.1.mlp") == Qt.CheckState.PartiallyChecked


def test_columns_take_their_contents_width_and_the_names_come_first(qtbot):
    # A wide dock shows every name, every header and the Type column whole; the
    # Layer column is as wide as its longest name, not a fixed 220 px.
    from PySide6.QtGui import QFontMetrics

    from hookscope.widgets.layer_tree_model import (COL_CAPTURE, COL_HI, COL_INTERVENTION, COL_LAYER,
                                                    COL_LO, COL_SHAPE, COL_TYPE, HEADERS)
    from hookscope.widgets.layer_tree_view import INDENT, MIN_LAYER

    w = _widget(qtbot, "demo:transformer")
    w.resize(900, 600)
    w.show()
    qtbot.waitExposed(w)
    view, fm = w.view, QFontMetrics(w.view.font())
    nodes = [n for n in w.model.tree().walk() if n.path]
    longest = max((n.path.count(".") + 1) * INDENT + fm.horizontalAdvance(n.name) for n in nodes)
    assert longest <= view.columnWidth(COL_LAYER) <= longest + 40
    for col in (COL_INTERVENTION, COL_LO, COL_HI, COL_SHAPE, COL_TYPE):
        assert view.columnWidth(col) >= fm.horizontalAdvance(HEADERS[col]), HEADERS[col]
    assert view.columnWidth(COL_TYPE) >= max(fm.horizontalAdvance(n.type_name) for n in nodes)
    header = view.header()
    assert header.sectionViewportPosition(COL_TYPE) + header.sectionSize(COL_TYPE) <= view.viewport().width()
    # a clamp's text gets its room in the Intervention column
    w.model.session.intervene("encoder.layers.0.linear1", Clamp(-0.5, 0.5))
    text = w.model.intervention("encoder.layers.0.linear1").describe()
    assert view.columnWidth(COL_INTERVENTION) >= fm.horizontalAdvance(text)
    # a narrow dock: the edited columns stay in view, the names keep at least their minimum
    w.resize(330, 600)
    qtbot.waitUntil(lambda: w.editable_right_edge() <= view.viewport().width())
    assert view.columnWidth(COL_LAYER) >= MIN_LAYER and view.columnWidth(COL_CAPTURE) >= 30
