"""The tree widget: filter box, selection signal, programmatic selection."""

from __future__ import annotations

from PySide6.QtCore import QItemSelectionModel

from hookscope.core import load_model, module_tree, observe

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
