"""A layer panel draws a record's prepared shape view as it comes when it matches what
the panel shows (view, size, colour scale), and the same arrays it makes itself
otherwise; with a view worker, what it makes itself is made in that thread, and the
picture drawn stays until it arrives."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from PySide6.QtCore import Qt

from hookscope.core import Clamp, Session
from hookscope.core.engine import reference_of
from hookscope.core.views.display import record_display
from hookscope.widgets.layer_plot import LayerPlot
from hookscope.widgets.view_worker import ViewWorker

LAYER = "blocks.0.mlp.0"


@pytest.fixture(scope="module")
def lm_record():
    s = Session.load("demo:lm")
    try:
        s.capture(LAYER)
        s.intervene(LAYER, Clamp(-0.5, 0.5))
        return s.run().captures[LAYER][0]
    finally:
        s.close()


@pytest.fixture
def plot(qtbot):
    p = LayerPlot(LAYER)
    qtbot.addWidget(p)
    p.resize(1000, 380)
    p.show()
    qtbot.waitExposed(p)
    return p


def _pick(p: LayerPlot, qtbot, view: str) -> None:
    """Choose ``view`` in the panel's combo box with the arrow keys."""
    combo = p.chooser.combo
    combo.setFocus()
    key = Qt.Key.Key_Down if combo.findData(view) > combo.currentIndex() else Qt.Key.Key_Up
    while p.shown_view != view:
        before = combo.currentIndex()
        qtbot.keyClick(combo, key)
        assert combo.currentIndex() != before, f"{view} not offered"


def _drawn(p: LayerPlot):
    w = p.wide
    if w.shape.picture is not None:
        return w.drawn.image, w.image.image
    if w.shape.view == "unit_norm":
        return w._unit_norms
    return w._norms


@pytest.mark.parametrize("view", ["map", "top_k", "row_norm", "unit_norm"])
def test_the_prepared_view_is_drawn_as_it_comes_and_equals_what_the_panel_makes(
        plot, qtbot, lm_record, view):
    plot.update_record(lm_record)
    _pick(plot, qtbot, view)
    mine = [np.array(a, copy=True) for a in _drawn(plot)]
    prepared = record_display(lm_record, reference_of, plot.shape_wanted())
    assert prepared is not None and prepared.shape is not None
    plot.update_record(lm_record, prepared)
    assert plot.wide.shape is prepared.shape               # drawn as it came
    for a, b in zip(mine, _drawn(plot)):
        np.testing.assert_array_equal(a, b)
    if view in ("map", "top_k"):
        assert plot.wide.drawn.image is prepared.shape.picture.image


def test_a_view_switched_by_hand_is_made_in_the_worker_and_the_picture_stays_till_then(
        plot, qtbot, lm_record, monkeypatch):
    worker = ViewWorker(plot)
    plot.view_worker = worker
    prepared = record_display(lm_record, reference_of, plot.shape_wanted())
    plot.update_record(lm_record, prepared)
    assert plot.wide.shape is prepared.shape and not worker.busy   # prepared: nothing to make
    threads = []
    gate = threading.Event()
    import hookscope.widgets.layer_plot as layer_plot
    made = layer_plot.shape_display

    def held(*args, **kwargs):
        threads.append(threading.current_thread().name)
        gate.wait(10)
        return made(*args, **kwargs)

    monkeypatch.setattr(layer_plot, "shape_display", held)
    old = plot.wide.drawn
    _pick(plot, qtbot, "top_k")
    qtbot.waitUntil(lambda: bool(threads))
    assert plot.wide.drawn is old and plot.image.isVisible()   # the map stays meanwhile
    gate.set()
    qtbot.waitUntil(lambda: not worker.busy and plot.wide.shape.view == "top_k")
    assert threads == [t for t in threads if t.startswith("hookscope-views")]
    want = made(lm_record.tensor, reference_of(lm_record)[0], "tokens", "top_k",
                *plot.wide.pixel_size(), plot.wide.log_scale())
    np.testing.assert_array_equal(plot.wide.drawn.image, want.picture.image)
    np.testing.assert_array_equal(plot.wide.top_units, want.units)
    worker.shutdown()


def test_an_answer_for_a_view_left_since_is_dropped(plot, qtbot, lm_record, monkeypatch):
    worker = ViewWorker(plot)
    plot.view_worker = worker
    plot.update_record(lm_record, record_display(lm_record, reference_of, plot.shape_wanted()))
    gate = threading.Event()
    import hookscope.widgets.layer_plot as layer_plot
    made = layer_plot.shape_display
    monkeypatch.setattr(layer_plot, "shape_display",
                        lambda *a, **k: (gate.wait(10), made(*a, **k))[1])
    _pick(plot, qtbot, "top_k")       # held in the worker ...
    _pick(plot, qtbot, "unit_norm")   # ... and replaced before it was drawn
    gate.set()
    qtbot.waitUntil(lambda: not worker.busy)
    assert plot.shown_view == "unit_norm" and plot.wide.shape.view == "unit_norm"
    assert plot.norm_post.isVisible() and not plot.image.isVisible()
    worker.shutdown()
