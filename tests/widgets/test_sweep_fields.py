"""The Sweep dock's fields: one axis edited in the axes line, the metric chosen with the
keyboard and its tokens typed or picked from the offered predictions."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtTest import QTest

from hookscope.core import load_model
from hookscope.core.analyses.sweep_metrics import make_metric
from hookscope.widgets.sweep_fields import MetricChooser, axis_pairs, with_axis


def test_one_axis_changes_the_others_stay():
    line = "layer=blocks.*; pos=all"
    assert with_axis(line, "pos", "3,5") == "layer=blocks.*; pos=3,5"
    assert with_axis(line, "layer", "conv1,conv2") == "layer=conv1,conv2; pos=all"
    assert with_axis("layer=blocks.*", "pos", "all") == "layer=blocks.*; pos=all"
    assert with_axis(line, "pos", None) == "layer=blocks.*"
    assert axis_pairs(" a = 1 ;; b=2 ") == [("a", "1"), ("b", "2")]


def test_metric_from_the_list_with_tokens_typed_or_picked(qtbot):
    m = MetricChooser()
    qtbot.addWidget(m)
    m.show()
    kinds = [m.kind.itemText(i) for i in range(m.kind.count())]
    assert kinds == ["kl", "logit-diff", "prob", "logit", "top-changed", "max-abs-diff"]
    assert m.text() == "kl" and not m.tokens[0].isVisible()
    m.kind.setFocus()
    QTest.keyClick(m.kind, Qt.Key.Key_Down)
    assert m.text().startswith("logit-diff:") and m.tokens[1].isVisible()
    m.set_choices([("·Paris  #11 p=0.50", "#11"), ("·Rome  #12 p=0.20", "#12")])
    box = m.tokens[0]
    box.setFocus()
    QTest.keyClick(box, Qt.Key.Key_Down)      # the first prediction
    QTest.keyClicks(m.tokens[1].lineEdit(), " Rome")
    assert m.text() == "logit-diff:#11,' Rome'"
    QTest.keyClick(m.kind, Qt.Key.Key_Down)
    assert m.text() == "prob:#11" and not m.tokens[1].isVisible()
    # what it writes is what the sweep reads
    lm = load_model("demo:lm")
    m.set_text("logit-diff:'m','r'")
    metric = make_metric(m.text(), lm.meaning)
    assert metric.name == "logit-diff:'m','r'"
