"""The divergence view on its own: a real diff (demo:cnn against itself with conv2's weights
nudged) drawn by layer on a log axis, the tolerance line, the first divergent layer starred,
equal layers on the floor, and a click on a point naming its layer; the layers only one of two
models runs said under the plot."""

from __future__ import annotations

import math

import numpy as np
import pytest
from PySide6.QtCore import Qt
from PySide6.QtTest import QTest

from hookscope.core import diff
from hookscope.widgets.divergence_view import DivergenceView, floor_of
from tests.support.differing_trees import Net, example
from tests.support.compare_window import nudged_cnn
from tests.support.screenshots import wanted, save_shot


@pytest.fixture
def nudged(tmp_path):
    lm, path = nudged_cnn(tmp_path)
    return diff(lm, weights=str(path))


@pytest.fixture
def view(qtbot):
    v = DivergenceView()
    qtbot.addWidget(v)
    v.resize(1000, 650)
    v.show()
    qtbot.waitExposed(v)
    return v


def test_layers_against_relative_change_with_the_first_starred(view, nudged, qtbot, tmp_path):
    view.show_result(nudged)
    rels = [r.relative_change for r in nudged.layers]
    floor = floor_of(rels, nudged.tolerance)
    x, y = view.curve.getData()
    assert x.tolist() == list(range(len(rels)))
    want = np.log10([v if v > 0 else floor for v in rels])
    np.testing.assert_allclose(y, want)
    assert view.tolerance_line.value() == pytest.approx(math.log10(nudged.tolerance))
    # the four layers before conv2 are equal: on the floor, below everything else
    assert all(v == 0 for v in rels[:4]) and all(y[i] < min(y[4:]) for i in range(4))
    assert view.equal_line.isVisible() and view.equal_line.value() == pytest.approx(y[0])
    sx, sy = view.first.getData()
    assert sx.tolist() == [4.0] and sy.tolist() == [y[4]]
    assert view.bottom.labels[4] == "conv2"
    assert "conv2 (call 0)" in view.plot.titleLabel.text

    g = view.graphics
    pos = g.mapFromScene(view.point_center(4))
    with qtbot.waitSignal(view.layerChosen) as sig:
        QTest.mouseClick(g.viewport(), Qt.MouseButton.LeftButton, pos=pos)
    assert sig.args == ["conv2", 0] and view.chosen == 4 and view.chosen_mark.isVisible()
    assert view.readout.text().startswith(f"conv2 (call 0): relative change {rels[4]:.4g}")
    pos = g.mapFromScene(view.point_center(1))
    with qtbot.waitSignal(view.layerChosen) as sig:
        QTest.mouseClick(g.viewport(), Qt.MouseButton.LeftButton, pos=pos)
    assert sig.args == ["bn1", 0] and view.readout.text() == "bn1 (call 0): equal in A and B"

    if wanted():
        for w, h in ((1000, 650), (1400, 900)):
            view.resize(w, h)
            qtbot.wait(50)
            save_shot(view, f"divergence_{w}x{h}")


def test_no_layer_past_the_tolerance_and_empty(view, nudged):
    quiet = type(nudged)(nudged.layers, 10.0, output=nudged.output)
    view.show_result(quiet)
    assert view.first.getData()[0].tolist() == [] and not view.first.isVisible()
    assert "none" in view.plot.titleLabel.text
    view.show_result(None)
    assert not view.curve.isVisible() and view.row_at(view.plot.sceneBoundingRect().center()) is None
    assert not view.unaligned.isVisible()


def test_layers_and_calls_only_one_model_has_are_said_under_the_plot(view, qtbot):
    """Model A has ``norm``, B six ``extras`` and a second call of ``act``: none has a point,
    and the line under the plot names them (four per model, the rest counted), the full
    lists in its tooltip."""
    got = diff(Net(norm=True).eval(), Net(extras=6, twice=True).eval(), example())
    assert got.only_in_a == ("norm",) and len(got.only_in_b) == 6
    view.show_result(got)
    assert view.unaligned.isVisible()
    first, *notes = view.unaligned.text().split("\n")
    b, a = first.split(" · ")
    assert b == f"only in B (6): {', '.join(got.only_in_b[:4])} and 2 more"
    assert a == "only in A (1): norm"
    # act ran twice in B, once in A: its second call has no row, and the note says so
    assert [r.path for r in got.layers].count("act") == 1
    assert notes == list(got.notes) and any("'act': 1 and 2" in n for n in notes)
    tip = view.unaligned.toolTip()
    assert all(p in tip for p in got.only_in_b) and "more" not in tip
    assert "only in A (1): norm<br>" in tip
    # no point stands for a layer only one model ran
    assert not set(view.bottom.labels) & {*got.only_in_a, *got.only_in_b}
    if wanted():
        view.resize(1400, 900)
        qtbot.wait(50)
        save_shot(view, "divergence_unaligned_1400x900")
    view.show_result(diff(Net().eval(), Net().eval(), example()))
    assert not view.unaligned.isVisible() and view.unaligned.text() == ""
