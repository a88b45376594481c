"""Before/after output view: the core's numbers, bars or lines, words."""

from __future__ import annotations

import numpy as np
import pytest

from support.mouse_events import hover, view_to_viewport

from hookscope.core import Plan, compare, load_model
from hookscope.core.engine.output_diff import flat_floats
from hookscope.widgets.output_comparison import OutputComparison


@pytest.fixture
def view(qtbot):
    w = OutputComparison()
    qtbot.addWidget(w)
    w.resize(420, 500)
    w.show()
    qtbot.waitExposed(w)
    return w


def _run(spec, plan):
    lm = load_model(spec)
    return compare(lm.module, lm.example_input, plan)


def test_clamp_demo_shows_core_numbers_as_bars(view):
    r = _run("demo:clamp", Plan(clamp={"0": (-0.5, 0.5)}))
    view.show_result(r)
    without, with_ = view.values()
    np.testing.assert_array_equal(without, flat_floats(r.output_without))
    np.testing.assert_array_equal(with_, flat_floats(r.output_with))
    assert view.objectName() == "outputComparison"
    assert view.mode == "bars"
    assert r.outputs_differ
    assert "changed the output" in view.summary.text()
    assert f"{r.max_abs_diff:.4g}" in view.summary.text()


def test_capture_only_says_identical(view):
    view.show_result(_run("demo:features", Plan(capture=["fc1", "fc2", "fc3"])))
    assert "identical" in view.summary.text() and "only captured" in view.summary.text()


def test_transformer_output_uses_lines(view):
    r = _run("demo:transformer", Plan(clamp={"encoder.layers.0.linear1": (-0.5, 0.5)}))
    view.show_result(r)
    assert view.mode == "lines"
    without, with_ = view.values()
    assert without.size == 12 * 16
    np.testing.assert_array_equal(with_, flat_floats(r.output_with))
    assert view.diff_plot.isVisible()
    # And back to bars for a small output, with the same items.
    bars = view.bars_with
    view.show_result(_run("demo:cnn", Plan(clamp={"conv1": (-0.5, 0.5)})))
    assert view.mode == "bars" and view.bars_with is bars


def test_identical_outputs_explained_from_the_captures():
    from hookscope.core import Plan, compare, load_model
    from hookscope.widgets.output_comparison import verdict
    from hookscope.core.engine.output_diff import flat_array

    lm = load_model("demo:cnn")
    m, x = lm.module, lm.example_input

    def say(plan):
        r = compare(m, x, plan)
        assert not r.outputs_differ
        return verdict(r, flat_array(r.output_without), flat_array(r.output_with))

    # a bound nothing reaches
    assert "clamp(-100, 100) on conv1 changed no value" in say(
        Plan(capture=["conv1"], clamp={"conv1": (-100, 100)}))
    # relu1 zeroes negatives: clamping them at a low bound below 0 changes them, the output not
    text = say(Plan(capture=["bn1"], clamp={"bn1": (-0.05, float("inf"))}))
    assert "although clamp(" in text and "bn1" in text and "absorbed" in text
    assert "Capture conv1 to see which" in say(Plan(clamp={"conv1": (-100, 100)}))


def test_hovering_an_output_bar_reads_its_index_label_and_values(view, qtbot):
    r = _run("demo:clamp", Plan(clamp={"0": (-0.5, 0.5)}))
    view.show_result(r)
    view.set_labels(["cat", "dog"])
    view.graphics.grab()   # a paint applies the auto range
    without, with_ = flat_floats(r.output_without), flat_floats(r.output_with)
    vb = view.plot.getViewBox()
    with qtbot.waitSignal(view.readout) as sig:
        hover(view.graphics, view_to_viewport(view.graphics, vb, 1.0, with_[1] / 2))
    assert sig.args[0] == f"output 1 (dog): without {without[1]:.4g} · with {with_[1]:.4g}"
    assert view.tools.label.isVisible() and view.tools.label.text() == sig.args[0]
    header, rows = view.rows()
    assert header == ["index", "label", "without", "with"]
    assert rows[1] == [1, "dog", pytest.approx(without[1]), pytest.approx(with_[1])]


def test_the_largest_change_never_breaks_inside_its_symbol(view):
    from PySide6.QtGui import QTextLayout, QTextOption

    view.show_result(_run("demo:clamp", Plan(clamp={"0": (-0.5, 0.5)})))
    text = view.summary.text()
    for width in range(150, 420, 7):   # every width a dock might give the label
        layout = QTextLayout(text, view.summary.font())
        option = QTextOption()
        option.setWrapMode(QTextOption.WrapMode.WordWrap)
        layout.setTextOption(option)
        layout.beginLayout()
        lines = []
        while (line := layout.createLine()).isValid():
            line.setLineWidth(width)
            lines.append(text[line.textStart(): line.textStart() + line.textLength()])
        layout.endLayout()
        # "|Δ| = 0.4628" stays on one line (wherever that line breaks)
        assert any("Δ" in ln and ln.count("|") == 2 and "=" in ln and "0." in ln
                   for ln in lines), (width, lines)


def test_a_batched_output_is_shown_one_sample_at_a_time_chosen_by_keyboard(view, qtbot):
    # demo:clamp on a batch of two: (2, 2) outputs are two samples, not four bars in a row
    import torch
    from PySide6.QtCore import Qt
    from PySide6.QtTest import QTest

    lm = load_model("demo:clamp")
    x = torch.tensor([[1.0, 2.0, 3.0], [-3.0, 0.5, 2.0]])
    r = compare(lm.module, x, Plan(clamp={"0": (-0.5, 0.5)}))
    view.show_result(r)
    box = view.sample_box
    assert box.isVisible() and box.count() == 2
    without, with_ = view.values()
    np.testing.assert_array_equal(without, r.output_without[0].double().numpy())
    np.testing.assert_array_equal(with_, r.output_with[0].double().numpy())
    box.setFocus()
    QTest.keyClick(box, Qt.Key.Key_Down)
    qtbot.waitUntil(lambda: box.currentIndex() == 1)
    without, with_ = view.values()
    np.testing.assert_array_equal(without, r.output_without[1].double().numpy())
    assert "sample 1" in view.plot.getAxis("bottom").labelText
    # one sample: no chooser
    view.show_result(compare(lm.module, x[:1], Plan()))
    assert not box.isVisible()
