"""The layer panel of a nested output: a leaf chooser lists every tensor leaf with its
statistics, and the panel draws the chosen one (kept by name across runs)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch
from PySide6.QtCore import Qt
from PySide6.QtTest import QTest

from hookscope.core import Plan, compare
from hookscope.widgets.activation_panel import ActivationPanel
from hookscope.widgets.value_format import format_shape
from hookscope.widgets.leaf_chooser import LeafChooser

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "core"))
from nested_models import LSTMNet, make, run_hand  # noqa: E402


@pytest.fixture
def panel(qtbot):
    p = ActivationPanel()
    qtbot.addWidget(p)
    p.resize(900, 700)
    p.show()
    return p


def test_chooser_lists_every_leaf_and_draws_the_chosen_one(panel, qtbot):
    model, x = make(LSTMNet)
    plan = Plan(capture=["inner", "head"], clamp={"inner": (-0.2, 0.3)})
    panel.show_result(compare(model, x, plan))
    _, _, post, _ = run_hand(model, "inner", x, lambda t: t.clamp(-0.2, 0.3))
    plot = panel.panels()[("inner", 0)]
    chooser = panel.findChild(LeafChooser, "leafChooser:inner:0")
    assert chooser is not None and chooser.isVisible()
    assert [chooser.itemData(i) for i in range(chooser.count())] == list(post)
    for i, (leaf, t) in enumerate(post.items()):  # each entry: name, shape and statistics
        text = chooser.itemText(i)
        assert text.startswith(f"{leaf} · {format_shape(tuple(t.shape))} · min ")
        assert f"max {float(t.max()):.4g}" in text
    assert plot.record.leaf == "[0]"
    assert panel.findChild(LeafChooser, "leafChooser:head:0") is None  # one tensor: no chooser

    chooser.setFocus()
    QTest.keyClick(chooser, Qt.Key.Key_Down)  # the keyboard picks the next leaf: h
    qtbot.waitUntil(lambda: plot.record.leaf == "[1][0]")
    assert torch.equal(plot.record.tensor, post["[1][0]"])
    assert "[1][0]" in plot.title.text()
    assert f"max {float(post['[1][0]'].max()):.4g}" in plot.stats_label.text()

    plan2 = Plan(capture=["inner", "head"], clamp={"inner": (-0.1, 0.1)})  # a new run
    panel.show_result(compare(model, x, plan2))
    _, _, post2, _ = run_hand(model, "inner", x, lambda t: t.clamp(-0.1, 0.1))
    assert chooser.chosen() == "[1][0]" and plot.record.leaf == "[1][0]"  # the choice stays
    assert torch.equal(plot.record.tensor, post2["[1][0]"])
