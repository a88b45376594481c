"""Results come display-ready from the runner's thread: while a bound is dragged in
Live mode, the GUI thread never parses the input, decodes its image or re-reads
the output's meaning; each result's numbers were made once, on the runner's
thread, and the plots show the very numbers core's functions give."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from support.mouse_events import drag_line
from support.thread_calls import count_calls

from hookscope.core.engine import reference_of
from hookscope.core.views import ResultDisplay, ValueSpread, common_bins, flat_array, largest_finite

WATCHED = ("parse_input", "load_image", "input_image", "describe_outputs")


@pytest.fixture
def calls(monkeypatch):
    """``Counter`` of ``(function name, "gui" or "worker")`` for every call of the
    watched functions, through whichever module's name it is called by."""
    import hookscope.core.model.inputs as inputs_mod
    import hookscope.core.views.outputs as outputs_mod

    originals = {"parse_input": inputs_mod.parse_input, "load_image": inputs_mod.load_image,
                 "input_image": outputs_mod.input_image,
                 "describe_outputs": outputs_mod.describe_outputs}
    main = threading.main_thread()
    return count_calls(monkeypatch, originals,
                       lambda: "gui" if threading.current_thread() is main else "worker")


def _digit_png(path):
    from PIL import Image

    rng = np.random.default_rng(0)
    Image.fromarray((rng.random((8, 8)) * 255).astype(np.uint8), "L").save(path)
    return str(path)


def test_live_drags_never_parse_or_decode_on_the_gui_thread(make_window, qtbot, tmp_path, calls):
    image = _digit_png(tmp_path / "digit.png")
    win = make_window(["demo:cnn", "--capture", "conv1,relu1", "--intervene", "relu1=scale:0.5",
                       "--input", image, "--live"])
    qtbot.waitUntil(lambda: win.last_result is not None and win.is_idle(), timeout=60_000)
    panel = win.panel.panels()[("conv1", 0)]
    qtbot.waitExposed(panel)
    panel.grab()
    shown = []
    win.resultShown.connect(shown.append)
    w = win.worker
    runs0 = w.runs_done + w.runs_dropped + w.runs_failed
    calls.clear()
    for x in (0.4, 0.2, 0.3):
        drag_line(panel.hist_widget, panel.hi_line, x)
        qtbot.waitUntil(lambda: win.is_idle() and win.last_result.plan == win.session.plan,
                        timeout=60_000)
    assert len(shown) >= 2
    gui = {name: n for (name, where), n in calls.items() if where == "gui"}
    assert gui == {}, gui   # the GUI thread only swapped pictures in
    # On the runner's thread: the input parsed (its image decoded) once per run begun,
    # never again for the display; each shown result described once.
    begun = w.runs_done + w.runs_dropped + w.runs_failed - runs0
    decoded = calls[("load_image", "worker")]
    assert 1 <= decoded == calls[("parse_input", "worker")] <= begun
    assert len(shown) <= calls[("describe_outputs", "worker")] <= w.runs_done

    # The numbers drawn are the display's, and the display's are core's.
    r = win.last_result
    assert isinstance(r.display, ResultDisplay)
    np.testing.assert_array_equal(win.outputs.values()[1], flat_array(r.output_with))
    for path in ("conv1", "relu1"):
        rec = r.captures[path][0]
        pre_t, pre_stats, _ = reference_of(rec)
        prepared = r.display.for_record(rec)
        assert prepared is not None
        tensors = [t for t in (rec.tensor, pre_t) if t is not None]
        spread = ValueSpread(*tensors, largest=largest_finite(rec.stats, pre_stats))
        assert (prepared.spread.decades, prepared.spread.typical) == (spread.decades, spread.typical)
        want = common_bins(rec.stats, pre_stats, rec.tensor)
        if want is None:
            assert prepared.common_counts is None
        else:
            np.testing.assert_array_equal(prepared.common_counts, want)
        plot = win.panel.panels()[(path, 0)]
        qtbot.waitUntil(lambda: plot.record is rec)
        plot.flush()
        drawn = plot.histogram._series["after"][1]
        np.testing.assert_array_equal(drawn, want if want is not None else rec.stats.hist_counts)
