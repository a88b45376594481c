"""The module-tree item model: Qt contract, capture check boxes, clamp cells."""

from __future__ import annotations

import math

import pytest
from PySide6.QtCore import Qt

from hookscope.core import Clamp, Plan, load_model, module_tree, observe
from hookscope.widgets.layer_tree_model import (COL_CALLS, COL_CAPTURE, COL_HI, COL_LAYER, COL_LO,
                                                COL_PARAMS, COL_SHAPE, LayerTreeModel)

CHECK = Qt.ItemDataRole.CheckStateRole


def _tree(spec: str, observed: bool = True):
    lm = load_model(spec)
    tree = module_tree(lm.module)
    if observed:
        observe(lm.module, lm.example_input, tree)
    return tree


@pytest.mark.parametrize("spec", ["demo:cnn", "demo:transformer", "demo:clamp"])
def test_model_passes_qt_model_tester(qtmodeltester, spec):
    model = LayerTreeModel(_tree(spec))
    qtmodeltester.check(model)
    model.set_capture("encoder.layers.0" if "transformer" in spec else
                      model.path_for_index(model.index(0, 0)), True)
    qtmodeltester.check(model)


def test_columns_show_names_shapes_params():
    model = LayerTreeModel(_tree("demo:transformer"))
    idx = model.index_for_path("encoder.layers.0.linear1")
    assert idx.data() == "linear1"
    assert idx.data(Qt.ItemDataRole.ToolTipRole).startswith("encoder.layers.0.linear1")
    assert idx.siblingAtColumn(COL_SHAPE).data() == "1×12×64"
    assert idx.siblingAtColumn(COL_PARAMS).data() == "2,112"
    assert idx.siblingAtColumn(COL_CALLS).data() == "1"
    assert model.path_for_index(idx) == "encoder.layers.0.linear1"


def test_update_observed_fills_shapes(qtbot):
    lm = load_model("demo:cnn")
    tree = module_tree(lm.module)
    model = LayerTreeModel(tree)
    idx = model.index_for_path("conv1", COL_SHAPE)
    assert idx.data() == ""
    observed = observe(lm.module, lm.example_input, module_tree(lm.module))
    with qtbot.waitSignal(model.dataChanged):
        model.update_observed(observed)
    assert idx.data() == "1×8×8×8"


def test_ticking_capture_adds_to_plan(qtbot):
    model = LayerTreeModel(_tree("demo:cnn"))
    idx = model.index_for_path("conv1", COL_CAPTURE)
    assert idx.data(CHECK) == Qt.CheckState.Unchecked
    with qtbot.waitSignal(model.planChanged) as sig:
        assert model.setData(idx, Qt.CheckState.Checked.value, CHECK)
    assert sig.args[0].capture == ("conv1",)
    assert model.plan().capture == ("conv1",)
    assert idx.data(CHECK) == Qt.CheckState.Checked
    # Model order, whatever the order of ticking.
    model.setData(model.index_for_path("fc", COL_CAPTURE), Qt.CheckState.Checked, CHECK)
    model.setData(model.index_for_path("bn1", COL_CAPTURE), Qt.CheckState.Checked, CHECK)
    assert model.plan().capture == ("conv1", "bn1", "fc")
    model.setData(idx, Qt.CheckState.Unchecked.value, CHECK)
    assert model.plan().capture == ("bn1", "fc")


def test_ticking_a_parent_captures_it_alone_and_capture_children_the_rest(qtbot):
    model = LayerTreeModel(_tree("demo:transformer"))
    parent = model.index_for_path("encoder.layers.0", COL_CAPTURE)
    model.setData(parent, Qt.CheckState.Checked, CHECK)
    assert model.plan().capture == ("encoder.layers.0",)
    assert parent.data(CHECK) == Qt.CheckState.Checked
    grand = model.index_for_path("encoder", COL_CAPTURE)
    assert grand.data(CHECK) == Qt.CheckState.PartiallyChecked   # not captured, a layer inside is
    model.capture_children("encoder.layers.0")
    cap = model.plan().capture
    assert "encoder.layers.0.linear1" in cap and "encoder.layers.0.self_attn.out_proj" in cap
    assert "encoder.layers.1.linear1" not in cap
    model.setData(parent, Qt.CheckState.Unchecked, CHECK)
    assert "encoder.layers.0" not in model.plan().capture
    assert parent.data(CHECK) == Qt.CheckState.PartiallyChecked   # its children still are
    model.capture_children("encoder.layers.0", False)
    assert not [p for p in model.plan().capture if p.startswith("encoder.layers.0")]
    assert parent.data(CHECK) == Qt.CheckState.Unchecked


def test_editing_clamp_cells_sets_clamp(qtbot):
    model = LayerTreeModel(_tree("demo:cnn"))
    lo = model.index_for_path("conv1", COL_LO)
    hi = model.index_for_path("conv1", COL_HI)
    with qtbot.waitSignal(model.planChanged) as sig:
        assert model.setData(lo, "-0.5")
    assert sig.args[0].clamp == {"conv1": (-0.5, math.inf)}
    assert hi.data() == "∞"
    assert model.setData(hi, "0.5")
    assert model.plan().clamp == {"conv1": (-0.5, 0.5)}
    assert lo.data() == "-0.5" and hi.data() == "0.5"
    # Clearing both bounds removes the clamp.
    assert model.setData(lo, "")
    assert model.plan().clamp == {"conv1": (-math.inf, 0.5)}
    assert model.setData(hi, "")
    assert model.plan().clamp == {}
    assert hi.data() == ""


@pytest.mark.parametrize("col,value,words", [(COL_LO, "abc", "must be a number"),
                                             (COL_LO, "2", "clamp low 2 is above high 1"),
                                             (COL_HI, "nan", "must be a number")])
def test_invalid_bound_is_refused(qtbot, col, value, words):
    model = LayerTreeModel(_tree("demo:cnn"))
    model.session.intervene("conv1", Clamp(0.0, 1.0))
    before = model.plan()
    with qtbot.waitSignal(model.errorOccurred) as sig, \
            qtbot.assertNotEmitted(model.planChanged):
        assert not model.setData(model.index_for_path("conv1", col), value)
    assert words in sig.args[0] and "conv1" in sig.args[0]
    assert model.plan() == before


def test_set_plan_is_silent_and_plan_round_trips(qtbot):
    model = LayerTreeModel(_tree("demo:features"))
    plan = Plan(capture=["fc3", "fc1"], clamp={"fc2": (-1.0, 1.0)}, keep_tensors=False)
    with qtbot.assertNotEmitted(model.planChanged):
        model.set_plan(plan)
    got = model.plan()
    assert got.capture == ("fc1", "fc3")
    assert got.clamp == {"fc2": (-1.0, 1.0)}
    assert got.keep_tensors is False
    assert model.index_for_path("fc2", COL_HI).data() == "1"
    with qtbot.waitSignal(model.planChanged):
        model.clear_clamp("fc2")
    assert model.plan().clamp == {}


def test_set_tree_keeps_state_for_known_paths():
    model = LayerTreeModel(_tree("demo:cnn"))
    model.set_capture("conv1", True)
    model.session.intervene("fc", Clamp(-1.0, 1.0))
    model.set_tree(_tree("demo:cnn"))
    assert model.plan().capture == ("conv1",)
    model.set_tree(_tree("demo:features"))
    assert model.plan().capture == () and model.plan().clamp == {}
    assert model.index_for_path("fc1", COL_LAYER).data() == "fc1"


def test_shared_module_shows_alias(qtmodeltester):
    from torch import nn

    lin = nn.Linear(2, 2)

    class Shared(nn.Module):
        def __init__(self):
            super().__init__()
            self.enc = nn.Sequential(lin)
            self.dec = nn.Sequential(lin)

    m = LayerTreeModel(module_tree(Shared()))
    qtmodeltester.check(m)
    idx = m.index_for_path("dec.0")
    assert "shares enc.0" in idx.data()
    assert m.index_for_path("dec.0", COL_PARAMS).data() == ""
    m.set_capture("dec.0", True)
    assert m.plan().capture == ("dec.0",)


def _one_of_each_kind():
    import torch

    from hookscope.core import (Add, Clamp, MeanAblate, Noise, Patch, Project, SaeAblate, SaeClamp,
                                SaeScale, Scale, SteeringVector, Zero, kinds)

    vec = SteeringVector("v", torch.ones(16))
    made = {"clamp": Clamp(-1.0, 1.0), "scale": Scale(0.5), "zero": Zero(), "mean": MeanAblate(),
            "noise": Noise(0.1, 3), "patch": Patch("[[1.0, 2.0, 3.0, 4.0]]"),
            "add": Add(vec, 2.0), "project": Project(vec),
            "sae-ablate": SaeAblate((1, 2)), "sae-clamp": SaeClamp((3,), 5.0),
            "sae-scale": SaeScale((3,), 0.5)}
    assert set(made) == set(kinds())  # a new built-in kind gets a row here
    return list(made.values())


@pytest.mark.parametrize("iv", _one_of_each_kind(), ids=lambda iv: iv.name)
def test_every_kind_of_intervened_layer_is_tinted_and_bold(iv):
    from hookscope.widgets.layer_tree_model import COL_INTERVENTION, INTERVENED_BRUSH

    model = LayerTreeModel(_tree("demo:features"))
    model.set_intervention("fc2", iv)
    for col in range(model.columnCount()):
        assert model.index_for_path("fc2", col).data(Qt.ItemDataRole.BackgroundRole) == INTERVENED_BRUSH
        assert model.index_for_path("fc1", col).data(Qt.ItemDataRole.BackgroundRole) is None
    for col in (COL_LAYER, COL_INTERVENTION):
        assert model.index_for_path("fc2", col).data(Qt.ItemDataRole.FontRole).bold()
        assert model.index_for_path("fc1", col).data(Qt.ItemDataRole.FontRole) is None
    assert model.index_for_path("fc2", COL_INTERVENTION).data() == iv.describe()
    model.set_intervention("fc2", None)
    assert model.index_for_path("fc2", COL_LAYER).data(Qt.ItemDataRole.BackgroundRole) is None
