"""A layer panel's shape view is made off the GUI thread: each run request says what
the panels show (view, log scale, size in pixels), the runner's thread pools their
pictures, norms, top units and bars with the result, and the GUI thread only moves
them in; a view switched by hand, a zoom with the mouse wheel and a resize are made
in the window's view worker thread, and draw what core's functions give."""

from __future__ import annotations

import importlib
import threading
from collections import Counter

import numpy as np
import pytest
from PySide6.QtCore import Qt
from support.mouse_events import drag_line, pick_view, view_to_viewport, wheel
from support.thread_calls import count_calls

from hookscope.core.engine import reference_of
from hookscope.core.views import shape_display, visible_window, window_picture

#: core's numeric view functions, watched wherever a module calls them by name.
WATCHED = ("reduce_2d", "pool_window", "row_norms", "unit_norms", "top_units", "top_k_picture",
           "view_image", "feature_grid", "bars_values", "picture", "heat_map", "shape_display",
           "whole_picture", "grid_picture", "window_picture", "colour_scale", "map_sources")


def _where() -> str:
    t = threading.current_thread()
    if t is threading.main_thread():
        return "gui"
    return "views" if t.name.startswith("hookscope-views") else "runner"


@pytest.fixture
def calls(monkeypatch):
    """``Counter`` of ``(function name, "gui" | "views" | "runner")`` for every call of the
    watched functions, through whichever module's name it is called by."""
    # Every module that calls them imported first: one imported while they are patched
    # would keep this test's wrapper for the next.
    importlib.import_module("hookscope.app.main_window")
    # By module name: the floor's face exports a function called wide_views.
    homes = [importlib.import_module(f"hookscope.core.views.{name}")
             for name in ("map_window", "shape_views", "views_by_shape", "wide_views")]
    originals = {name: getattr(m, name) for name in WATCHED for m in homes if hasattr(m, name)
                 and getattr(getattr(m, name), "__module__", "") == m.__name__}
    assert set(originals) == set(WATCHED)
    return count_calls(monkeypatch, originals, _where)


def _on(calls: Counter, where: str) -> dict[str, int]:
    return {name: n for (name, w), n in calls.items() if w == where}


def _settle(win, qtbot) -> None:
    qtbot.waitUntil(lambda: win.last_result is not None and win.is_idle(), timeout=60_000)
    for panel in win.panel.panels().values():
        win.panel.scroll.ensureWidgetVisible(panel)
        qtbot.waitUntil(lambda p=panel: not p._stale and p.record is not None)
    qtbot.waitUntil(win.is_idle, timeout=30_000)


def _run_button(win, qtbot) -> None:
    runs = win.worker.runs_done
    qtbot.mouseClick(win.run_bar.run_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: win.worker.runs_done > runs and win.is_idle(), timeout=60_000)


def _prepared_is_drawn(win) -> None:
    """Every panel drew its result's prepared shape view, as it came."""
    for key, panel in win.panel.panels().items():
        prep = panel._prepared
        assert prep is not None and prep.shape is not None, key
        d = prep.shape
        assert (d.kind, d.view) == (panel.view_kind, panel.shown_view), key
        if d.picture is not None:
            assert panel.wide.drawn is not None and panel.wide.drawn.image is d.picture.image, key
        elif d.bars is not None:
            assert panel.wide.bars[0] is d.bars[0], key
        else:
            norms = panel.wide._unit_norms if d.view == "unit_norm" else panel.wide._norms
            assert norms is not None and norms[0] is d.norms[0], key


def _live_drags(win, qtbot, path: str, xs: tuple[float, ...]) -> None:
    panel = win.panel.panels()[(path, 0)]
    win.panel.scroll.ensureWidgetVisible(panel)
    qtbot.waitExposed(panel)
    for x in xs:
        drag_line(panel.hist_widget, panel.hi_line, x)
        qtbot.waitUntil(lambda: win.is_idle() and win.last_result.plan == win.session.plan,
                        timeout=60_000)
    _settle(win, qtbot)


@pytest.mark.parametrize("argv", [
    ["demo:cnn", "--capture", "conv1,relu1,pool2,flatten,fc", "--intervene", "relu1=clamp:0:1"],
    ["demo:cnn", "--input", "random:4x1x8x8:seed=0", "--capture", "conv1,flatten,fc",
     "--intervene", "conv1=clamp:-1:1"],
])
def test_live_results_come_with_their_pictures_and_the_gui_thread_pools_nothing(
        make_window, qtbot, calls, argv):
    win = make_window([*argv, "--live"])
    _settle(win, qtbot)
    _run_button(win, qtbot)    # the panels exist now: this run knows their sizes
    _settle(win, qtbot)
    calls.clear()
    path = argv[argv.index("--intervene") + 1].split("=")[0]
    _live_drags(win, qtbot, path, (0.5, 0.3))
    assert _on(calls, "gui") == {}          # the GUI thread only swapped pictures in
    assert _on(calls, "views") == {}        # nothing was left to make afterwards
    assert calls[("shape_display", "runner")] >= len(win.panel.panels())
    _prepared_is_drawn(win)
    kinds = {p.view_kind for p in win.panel.panels().values()}
    assert kinds >= ({"feature_maps", "bars"} if "--input" not in argv
                     else {"feature_maps", "heatmap"})


def test_chosen_views_of_a_language_model_come_prepared_with_the_next_runs(make_window, qtbot,
                                                                            calls):
    win = make_window(["demo:lm", "--capture", "embed,blocks.0.mlp.0,ln_f,head",
                       "--intervene", "blocks.0.mlp.0=clamp:-1:1", "--live"])
    _settle(win, qtbot)
    panels = win.panel.panels()
    for path, view in (("embed", "top_k"), ("blocks.0.mlp.0", "row_norm"),
                       ("ln_f", "unit_norm")):
        panel = panels[(path, 0)]
        win.panel.scroll.ensureWidgetVisible(panel)
        calls.clear()
        pick_view(panel, qtbot, view)
        qtbot.waitUntil(lambda p=panel, v=view: win.is_idle() and p.wide.shape is not None
                        and p.wide.shape.view == v, timeout=30_000)
        # Switched by hand: made in the view worker, not on the GUI thread.
        assert _on(calls, "gui") == {}
        assert calls[("shape_display", "views")] >= 1, dict(calls)
    calls.clear()
    _live_drags(win, qtbot, "blocks.0.mlp.0", (0.6, 0.4))
    assert _on(calls, "gui") == {} and _on(calls, "views") == {}
    _prepared_is_drawn(win)
    shown = {path: p.shown_view for (path, _c), p in win.panel.panels().items()}
    assert shown == {"embed": "top_k", "blocks.0.mlp.0": "row_norm", "ln_f": "unit_norm",
                     "head": "map"}


def test_a_wheel_zoom_and_a_resize_are_pooled_in_the_view_worker(make_window, qtbot, calls):
    win = make_window(["demo:lm", "--capture", "blocks.0.mlp.0",
                       "--intervene", "blocks.0.mlp.0=clamp:-1:1"])
    _settle(win, qtbot)
    panel = win.panel.panels()[("blocks.0.mlp.0", 0)]
    calls.clear()
    vb = panel.view_widget.getPlotItem().getViewBox()
    n, offset, _end, _sep = panel._layout_key[4]
    at = view_to_viewport(panel.view_widget, vb, offset + 100.0, 6.0)
    for _ in range(10):
        wheel(panel.view_widget.viewport(), at, 1.0, ctrl=True)
    qtbot.waitUntil(lambda: panel.wide._window is not None and win.is_idle()
                    and panel.wide.drawn.side == "after · ", timeout=10_000)
    qtbot.waitUntil(lambda: not panel._range_timer.isActive() and win.is_idle())
    assert _on(calls, "gui") == {}
    assert calls[("window_picture", "views")] >= 1
    # What is drawn is core's pooling of the part in view of the after map.
    w = panel.wide
    post_m, pre_m, _kind, _shape = w.map_source
    (x0, x1), (y0, y1) = vb.viewRange()
    window = visible_window((x0, x1), (y0, y1), post_m.shape[0], post_m.shape[1], (n, offset))
    assert window == w._window and window.side == "after"
    want = window_picture(post_m, pre_m, window, w._full_layout[1], w._level, *w.pixel_size(),
                          w.log_scale())
    np.testing.assert_array_equal(w.drawn.image, want.image)
    np.testing.assert_array_equal(w.image.image, want.coloured.T)

    # Reset, then a much wider window: the map is pooled again for the new size, off the GUI.
    qtbot.mouseClick(panel.view_tools.reset_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: w._window is None and win.is_idle())
    calls.clear()
    before = w.drawn.image.shape
    win.resize(2200, 1300)
    qtbot.waitUntil(lambda: win.is_idle() and w.drawn.image.shape[1] > 1.25 * before[1],
                    timeout=30_000)
    assert _on(calls, "gui") == {}
    assert calls[("shape_display", "views")] >= 1
    rec = panel.record
    want_d = shape_display(rec.tensor, reference_of(rec)[0], panel.view_kind, panel.shown_view,
                           w.shape.height_px, w.shape.width_px, w.log_scale())
    np.testing.assert_array_equal(w.drawn.image, want_d.picture.image)
    # The next run asks for the new size, and its result fits as it comes.
    calls.clear()
    _run_button(win, qtbot)
    _settle(win, qtbot)
    assert _on(calls, "gui") == {} and _on(calls, "views") == {}
    _prepared_is_drawn(win)


def test_the_window_says_it_is_idle_once_the_view_worker_has_drawn_too(make_window, qtbot,
                                                                       calls):
    """The first result comes before the panels are laid out, so their pictures are made
    again in the view worker after the session went idle: "running…" leaves the status
    bar, and ``idle`` is emitted, only when that last picture is in."""
    win = make_window(["demo:lm", "--capture", "embed,blocks.0.mlp.1,ln_f",
                       "--intervene", "blocks.0.mlp.1=clamp:-0.5:0.5"])
    with qtbot.waitSignal(win.idle, timeout=60_000):
        qtbot.waitUntil(lambda: win.last_result is not None, timeout=60_000)
    qtbot.waitUntil(win.is_idle, timeout=60_000)
    assert calls[("shape_display", "views")] + calls[("whole_picture", "views")] >= 1, dict(calls)
    assert win.statusBar().currentMessage() != "running…"
