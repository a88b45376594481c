"""The attention view: one map per head of a real result (demo:lm, a clamp upstream),
without | with | difference chosen with the keyboard, hover reads the tokens and the
probabilities, a click on a head asks to act on it."""

import numpy as np
import pytest
from PySide6.QtCore import Qt
from PySide6.QtTest import QTest

from hookscope.core import Plan, load_model
from hookscope.core.analyses.attention_patterns import attention_patterns
from hookscope.widgets.attention_view import AttentionView
from support.mouse_events import hover
from support.keys import choose


@pytest.fixture(scope="module")
def result():
    lm = load_model("demo:lm")
    x = lm.meaning.codec.encode("the cat sat")
    import torch

    return attention_patterns(lm.module, torch.tensor([x]), Plan(clamp={"blocks.0": (-0.1, 0.1)}),
                              lm.meaning, ["blocks.1.attn", "blocks.0.attn"])


def test_maps_follow_the_choosers(qtbot, result):
    view = AttentionView()
    qtbot.addWidget(view)
    view.resize(900, 700)
    view.show()
    view.show_result(result)
    a = result["blocks.1.attn"]
    assert len(view.images) == a.heads == 4
    np.testing.assert_array_equal(view.images[2].image, a.with_[0, 2].double().numpy())
    choose(view.which, "without")
    np.testing.assert_array_equal(view.images[2].image, a.without[0, 2].double().numpy())
    choose(view.which, "difference")
    np.testing.assert_array_equal(view.images[1].image,
                                  (a.with_[0, 1].double() - a.without[0, 1].double()).numpy())
    choose(view.layer, "blocks.0.attn")
    np.testing.assert_array_equal(view.maps(), (result["blocks.0.attn"].with_[0].double()
                                                - result["blocks.0.attn"].without[0].double()).numpy())
    labels = view.plots[0].getAxis("bottom").labels
    assert len(labels) == 11 and labels[:3] == ["t", "h", "e"] and labels[-3:] == ["s", "a", "t"]
    assert view.plots[0].getAxis("left").labels == labels


def test_hover_reads_the_cell_and_a_click_picks_the_head(qtbot, result):
    view = AttentionView()
    qtbot.addWidget(view)
    view.resize(900, 700)
    view.show()
    view.show_result(result)
    qtbot.waitExposed(view)
    a = result["blocks.1.attn"]
    g = view.graphics

    def reads():
        hover(g, g.mapFromScene(view.cell_center(3, 8, 4)))
        return view.readout.text().startswith("blocks.1.attn head 3: query 8 s → key 4 c")

    qtbot.waitUntil(reads, timeout=5_000)
    text = view.readout.text()
    assert f"p without {float(a.without[0, 3, 8, 4]):.4f}, with {float(a.with_[0, 3, 8, 4]):.4f}" \
        in text
    assert view.marks[3].isVisible()
    with qtbot.waitSignal(view.headClicked, timeout=2_000) as got:
        QTest.mouseClick(g.viewport(), Qt.MouseButton.LeftButton,
                         pos=g.mapFromScene(view.cell_center(2, 5, 1)))
    assert got.args == ["blocks.1.attn", 2]
    assert "@heads=2" in view.readout.text()
