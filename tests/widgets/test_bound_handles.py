"""Clamp bound handles are on screen and grabbable at any plot width, and real
mouse drags on them (press, move, release at the line's screen position) edit
the clamp in the session's plan, the lines' one source."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import pytest
import torch
from support.mouse_events import drag_line, line_point

from PySide6.QtWidgets import QVBoxLayout, QWidget

from hookscope.core import Clamp, Intervention, Plan, Scale, Session, compare, load_model, param
from hookscope.widgets.histogram_view import HistogramView
from hookscope.widgets.activation_panel import ActivationPanel
from hookscope.widgets.layer_plot import LayerPlot


def _record(spec: str, path: str, clamp=None):
    lm = load_model(spec)
    plan = Plan(capture=(path,), clamp={path: clamp} if clamp else {})
    return compare(lm.module, lm.example_input, plan).captures[path][0]


def _shown_plot(qtbot, width: int, path: str = "fc1") -> LayerPlot:
    p = LayerPlot(path)
    qtbot.addWidget(p)
    p.resize(width, 320)
    p.show()
    qtbot.waitExposed(p)
    return p


class _Histogram(QWidget):
    """A bare HistogramView of layer ``fc1`` whose plot is ``width`` pixels wide."""

    def __init__(self, width: int) -> None:
        super().__init__()
        self.session = Session(runner_factory=None)
        self.view = HistogramView(self, self.session, "fc1")
        self.hist_widget = self.view.widget
        self.lo_line, self.hi_line = self.view.lo_line, self.view.hi_line
        QVBoxLayout(self).addWidget(self.hist_widget)
        self.layout().setContentsMargins(0, 0, 0, 0)
        self.resize(width, 260)

    def bounds(self):
        return self.view.lines.bounds()

    def set_bounds(self, bounds) -> None:
        if bounds is None:
            self.session.clear_intervention("fc1")
        else:
            self.session.intervene("fc1", Clamp(*bounds))


def _on_screen(p, line) -> bool:
    """The line is inside the histogram's visible view, at least 3 px from its edges."""
    pt = line_point(p.hist_widget, line)
    rect = p.hist_widget.mapFromScene(line.getViewBox().sceneBoundingRect()).boundingRect()
    return rect.left() + 3 <= pt.x() <= rect.right() - 3


@pytest.mark.parametrize("width", [400, 2560])
def test_open_bounds_sit_at_the_edges_and_a_real_drag_sets_one(qtbot, width):
    p = _Histogram(width)
    qtbot.addWidget(p)
    p.show()
    qtbot.waitExposed(p)
    rec = _record("demo:features", "fc1")
    p.view.draw(rec)
    assert p.bounds() is None
    assert p.hist_widget.width() == width
    for line in (p.lo_line, p.hi_line):
        assert _on_screen(p, line)
    stats = rec.stats
    target = stats.min + 0.3 * (stats.max - stats.min)
    drag_line(p.hist_widget, p.lo_line, target)
    lo, hi = p.session.plan.clamp["fc1"]
    span = stats.max - stats.min
    assert lo == pytest.approx(target, abs=0.03 * span)   # a pixel or two of mouse slack
    assert hi == math.inf                                  # the other end stays open
    assert p.bounds() == (lo, hi)
    assert p.lo_line.value() == pytest.approx(lo, abs=0.01 * span)   # the line stayed put
    # The high handle is still on screen and can be dragged below the data's max.
    target_hi = stats.min + 0.8 * span
    drag_line(p.hist_widget, p.hi_line, target_hi)
    got = p.session.plan.clamp["fc1"]
    assert got[0] == lo and got[1] == pytest.approx(target_hi, abs=0.03 * span)


def _clamped_plot(qtbot, bounds=(-0.5, 0.5)) -> LayerPlot:
    p = _shown_plot(qtbot, 700, "conv1")
    p.session.intervene("conv1", Clamp(*bounds))
    p.update_record(_record("demo:cnn", "conv1", bounds))
    return p


def test_a_drag_reports_every_step_and_low_never_passes_high(qtbot):
    p = _clamped_plot(qtbot)
    steps = []
    p.session.subscribe(lambda ev: steps.append(p.session.plan.clamp["conv1"])
                        if ev.kind == "plan" else None)
    drag_line(p.hist_widget, p.hi_line, 0.25)
    assert len(steps) >= 3 and all(lo == -0.5 for lo, _ in steps)
    lo, hi = p.session.plan.clamp["conv1"]
    assert lo == -0.5 and hi == pytest.approx(0.25, abs=0.05)
    drag_line(p.hist_widget, p.lo_line, 3.0)    # far past the high bound
    lo2, hi2 = p.session.plan.clamp["conv1"]
    assert lo2 <= hi2 == hi
    # One drag, one undo step.
    assert p.session.undo() and p.session.plan.clamp["conv1"] == (-0.5, hi)


def test_a_dragged_bound_has_one_short_precision(qtbot):
    p = _clamped_plot(qtbot)
    drag_line(p.hist_widget, p.hi_line, 0.2345678)
    hi = p.session.plan.clamp["conv1"][1]
    assert len(f"{hi:g}".lstrip("-").replace(".", "").lstrip("0")) <= 4   # e.g. 0.235, not 0.2345678
    assert p.hi_line.label.format == f"high {hi:g}"


def test_both_bounds_of_exercise_1_are_on_the_first_screen(qtbot):
    panel = ActivationPanel()
    qtbot.addWidget(panel)
    panel.resize(600, 500)
    panel.show()
    lm = load_model("demo:clamp")
    plan = Plan(capture=("0",), clamp={"0": (-0.5, 0.5)})
    panel.session.set_plan(plan)
    panel.show_result(compare(lm.module, lm.example_input, plan))
    p = panel.panels()[("0", 0)]
    qtbot.waitExposed(p)
    assert p.lo_line.value() == -0.5 and p.hi_line.value() == 0.5
    assert _on_screen(p, p.lo_line) and _on_screen(p, p.hi_line)
    assert p.lo_line.label.isVisible() and p.hi_line.label.isVisible()


@pytest.mark.parametrize("bounds", [None, (-0.05, 0.05), (-math.inf, 0.3)])
def test_bound_labels_never_overlap_on_a_narrow_histogram(qtbot, bounds):
    p = _Histogram(300)
    qtbot.addWidget(p)
    p.show()
    qtbot.waitExposed(p)
    rec = _record("demo:features", "fc1")
    p.view.draw(rec)
    p.set_bounds(bounds)
    p.grab()
    view = p.hist_widget.getPlotItem().getViewBox().sceneBoundingRect()
    labels = [line.label for line in (p.lo_line, p.hi_line) if line.label.isVisible()]
    assert len(labels) == 2
    rects = [lab.sceneBoundingRect() for lab in labels]
    assert all(view.contains(r) for r in rects)
    assert not rects[0].intersects(rects[1])


def test_a_bound_line_is_drawn_over_the_values_piled_up_at_it(qtbot):
    # After a clamp the values sit at the bound in one tall bar: the line must be
    # seen through it, in its own colour, where the bar is.
    from hookscope.widgets.histogram_view import BOUND_COLOUR

    p = _Histogram(500)
    qtbot.addWidget(p)
    p.show()
    qtbot.waitExposed(p)
    rec = _record("demo:cnn", "conv1", clamp=(-0.05, 0.05))
    p.set_bounds((-0.05, 0.05))
    p.view.draw(rec)
    qtbot.wait(10)
    img = p.hist_widget.grab().toImage()
    pt = line_point(p.hist_widget, p.view.hi_line)
    vb = p.view.hi_line.getViewBox()
    rect = p.hist_widget.mapFromScene(vb.sceneBoundingRect()).boundingRect()
    y = rect.bottom() - 4     # inside the spike's bar, just above the axis
    scale = img.width() / p.hist_widget.width()
    colours = [img.pixelColor(int((pt.x() + dx) * scale), int(y * scale)) for dx in (-1, 0, 1)]
    assert any(abs(c.red() - BOUND_COLOUR[0]) < 30 and abs(c.green() - BOUND_COLOUR[1]) < 30
               and abs(c.blue() - BOUND_COLOUR[2]) < 30 for c in colours), \
        [c.name() for c in colours]


def test_a_drag_keeps_what_else_the_intervention_says(qtbot):
    # The lines write only the dragged parameter: a clamp aimed at some positions
    # stays aimed, and a layer with a kind that has no bounds gets a clamp.
    from hookscope.core import At

    p = _shown_plot(qtbot, 700, "conv1")
    aimed = Clamp(-0.5, 0.5, at=At(units=(0, 1)))
    p.session.intervene("conv1", aimed)
    p.update_record(_record("demo:cnn", "conv1", (-0.5, 0.5)))
    drag_line(p.hist_widget, p.hi_line, 0.25)
    got = p.session.plan.intervention_for("conv1")
    assert isinstance(got, Clamp) and got.at == aimed.at and got.lo == -0.5
    assert got.hi == pytest.approx(0.25, abs=0.05)
    p.session.intervene("conv1", Scale(0.5))
    assert p.bounds() is None and p.lo_line.label.format == "low: none"
    drag_line(p.hist_widget, p.lo_line, 0.0)
    got = p.session.plan.intervention_for("conv1")
    assert isinstance(got, Clamp) and got.bounds()[1] == math.inf



@dataclass(frozen=True)
class Band(Intervention):
    """A kind of its own with two bounds: zero what lies outside ``[floor, ceiling]``."""

    floor: float = param("float", -1.0)
    ceiling: float = param("float", 1.0)
    name: ClassVar[str] = "test-band"
    draggable: ClassVar[tuple[str, ...]] = ("floor", "ceiling")

    def apply_tensor(self, t, ctx):
        return torch.where((t >= self.floor) & (t <= self.ceiling), t, torch.zeros_like(t))

    def bounds(self):
        return (self.floor, self.ceiling)


def test_lines_show_and_drag_any_kind_with_two_bounds(qtbot):
    # Not only a clamp: a kind that declares two bounds (bounds() and two draggable
    # parameters) gets its lines placed from the plan and its own parameters dragged.
    p = _shown_plot(qtbot, 700, "conv1")
    p.session.intervene("conv1", Band(-0.4, 0.6))
    p.update_record(_record("demo:cnn", "conv1"))
    assert p.bounds() == (-0.4, 0.6)
    assert (p.lo_line.value(), p.hi_line.value()) == pytest.approx((-0.4, 0.6))
    drag_line(p.hist_widget, p.hi_line, 0.3)
    got = p.session.plan.intervention_for("conv1")
    assert isinstance(got, Band) and got.floor == -0.4
    assert got.ceiling == pytest.approx(0.3, abs=0.05)
