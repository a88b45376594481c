"""A detector's boxes drawn on its input image: right count, right places, threshold, hover."""

from __future__ import annotations

from PySide6.QtCore import QPoint, Qt
from PySide6.QtGui import QColor
from PySide6.QtTest import QTest

from hookscope.core import Plan, compare, load_model
from hookscope.core.demos.demo_detector import HEIGHT, LABELS, WIDTH
from hookscope.core.plan.interventions import Scale, Zero
from hookscope.widgets.detection_view import WITH_COLOUR, WITHOUT_COLOUR
from hookscope.widgets.output_comparison import OutputComparison


def _shown(qtbot, plan):
    lm = load_model("demo:detector")
    w = OutputComparison()
    qtbot.addWidget(w)
    r = compare(lm.module, lm.example_input, plan)
    w.show_result(r, lm.meaning, lm.example_input)
    w.resize(700, 800)
    w.show()
    qtbot.waitExposed(w)
    view = w.meaning_view.detections
    qtbot.waitUntil(lambda: view.canvas.width() > 300)
    return lm, w, r, view


def _near(c: QColor, want: QColor, tol: int = 40) -> bool:
    return all(abs(a - b) <= tol for a, b in zip((c.red(), c.green(), c.blue()),
                                                 (want.red(), want.green(), want.blue())))


def _edge_colours(canvas, img, box):
    """Pixel colours along the left edge of ``box`` (input pixels), as drawn."""
    top, bottom = canvas.to_widget(box[0], box[1]), canvas.to_widget(box[0], box[3])
    x = round(top.x())
    return [img.pixelColor(x, y) for y in range(round(top.y()) + 3, round(bottom.y()) - 3)]


def _set_threshold(qtbot, spin, text):
    spin.setFocus()
    qtbot.keyClick(spin, Qt.Key.Key_A, Qt.KeyboardModifier.ControlModifier)
    qtbot.keyClicks(spin, text)
    qtbot.keyClick(spin, Qt.Key.Key_Return)


def test_boxes_without_are_drawn_where_the_model_put_them_and_threshold_hides_weak_ones(qtbot):
    _, w, r, view = _shown(qtbot, Plan(interventions={"backbone.relu2": Zero()}))
    assert view.isVisible() and not w.graphics.isVisible()  # no flattened series for boxes
    canvas = view.canvas
    rect = canvas.image_rect()
    assert abs(rect.width() / rect.height() - WIDTH / HEIGHT) < 0.02
    d = r.output_without[0]
    boxes = [b.tolist() for b in d["boxes"]]
    scores = d["scores"].tolist()
    assert len(canvas.shown("without")) == sum(s >= 0.5 for s in scores) == len(boxes)
    assert canvas.shown("with") == []  # the zeroed backbone found nothing
    img = canvas.grab().toImage()
    for box in boxes:
        colours = _edge_colours(canvas, img, box)
        assert colours and all(_near(c, WITHOUT_COLOUR) for c in colours), box
    # between the shapes (left of the first box) nothing is drawn: the dark background
    gap = canvas.to_widget(3, 50)
    assert not _near(img.pixelColor(round(gap.x()), round(gap.y())), WITHOUT_COLOUR)
    assert f"without: {len(boxes)} boxes" in view.legend.text().replace("&nbsp;", " ")
    # a threshold above the weakest score hides that box, and only that one
    weakest = min(scores)
    _set_threshold(qtbot, view.threshold, f"{weakest + 0.05:.2f}")
    qtbot.waitUntil(lambda: len(canvas.shown("without")) == len(boxes) - 1)
    assert (f"without: {len(boxes) - 1} boxes (of {len(boxes)})"
            in view.legend.text().replace("&nbsp;", " "))
    img = canvas.grab().toImage()
    for box, score in zip(boxes, scores):
        drawn = all(_near(c, WITHOUT_COLOUR) for c in _edge_colours(canvas, img, box))
        assert drawn == (score > weakest), (box, score)


def test_boxes_with_the_intervention_are_dashed_orange_and_below_threshold_not_drawn(qtbot):
    _, _, r, view = _shown(qtbot, Plan(interventions={"backbone.conv1": Scale(factor=0.5)}))
    canvas = view.canvas
    d = r.output_with[0]
    img = canvas.grab().toImage()
    for box, score in zip(d["boxes"].tolist(), d["scores"].tolist()):
        colours = _edge_colours(canvas, img, box)
        orange = sum(_near(c, WITH_COLOUR) for c in colours)
        if score >= 0.5:   # dashes: orange pixels with gaps between them
            assert 0.3 * len(colours) < orange < len(colours), box
        else:
            assert orange == 0, box
    assert len(canvas.shown("with")) == sum(s >= 0.5 for s in d["scores"].tolist())


def test_hovering_a_box_tells_its_label_and_score(qtbot):
    _, _, r, view = _shown(qtbot, Plan(clamp={"backbone.conv1": (-1.0, 0.6)}))
    canvas = view.canvas
    d = r.output_without[0]
    i = int(d["scores"].argmax())
    x1, y1, x2, y2 = d["boxes"][i].tolist()
    centre = canvas.to_widget((x1 + x2) / 2, (y1 + y2) / 2)
    with qtbot.waitSignal(canvas.hovered, timeout=5000):
        QTest.mouseMove(canvas, QPoint(round(centre.x()), round(centre.y())))
    label = LABELS[int(d["labels"][i])]
    assert f"without: {label} {float(d['scores'][i]):.2f}" in canvas.hover_text
    j = [k for k, b in enumerate(r.output_with[0]["boxes"].tolist()) if b == [x1, y1, x2, y2]]
    assert f"with: {label} {float(r.output_with[0]['scores'][j[0]]):.2f}" in canvas.hover_text
    corner = canvas.to_widget(1, 1)
    with qtbot.waitSignal(canvas.hovered, timeout=5000):
        QTest.mouseMove(canvas, QPoint(round(corner.x()), round(corner.y())))
    assert canvas.hover_text == ""
