"""The Sweep dock over an input set, driven with real keys and clicks: Inputs names a prompt
file (typed, or picked with Browse…), Run sweep runs every cell on every input in the
runner, and the heat map's numbers equal Session.sweep(..., inputs=...); hovering reads the
mean ± spread; a sweep of strengths of `add` (its vector from the Vectors field) draws the
curve of means with its spread band and the largest mean starred; a grid of layers ×
strengths draws one layer's curve picked in the Show list. Screenshots at 1000×650 and
1400×900 are saved where tests/support/screenshots.py says."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from PySide6.QtCore import Qt
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QFileDialog, QLineEdit

from hookscope.core import Add, At, Session, parse_input
from hookscope.core.analyses import sweep
from hookscope.core.analyses.steer_diff import diff_vector
from hookscope.widgets.sweep_plot import HEAT_MAP
from support.keys import choose, retype
from support.mouse_events import hover
from support.thread_calls import count_calls
from tests.support.screenshots import save_shot
from support.sweep_dock import fill_sweep, open_sweep_dock

PROMPT = "text:the cat sat on the "
PROMPTS = ["the cat sat on the ", "a dog sat on the ", "the bird sat on a "]
VECTOR = "diff:text:the cat|text:the dog"


@pytest.fixture
def calls(monkeypatch):
    """``Counter`` of ``(function name, "gui" or "worker")``: the sweep over the set, each
    prompt read as the model takes it, and each vector computed."""
    import hookscope.core.analyses.steer_diff as steer_diff
    import hookscope.core.analyses.sweep_inputs as sweep_inputs
    import hookscope.core.dataset.input_sets as input_sets

    originals = {"sweep_over_inputs": sweep_inputs.sweep_over_inputs,
                 "parse_text": input_sets.parse_text, "diff_vector": steer_diff.diff_vector}
    main = threading.main_thread()
    return count_calls(monkeypatch, originals,
                       lambda: "gui" if threading.current_thread() is main else "worker")


def _prompt_file(tmp_path):
    f = tmp_path / "prompts.txt"
    f.write_text("\n".join(PROMPTS) + "\n")
    return f


def _run(win, qtbot, view):
    before = view.result
    QTest.mouseClick(view.run_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: view.result is not None and view.result is not before
                    and win.is_idle() and view.run_button.isEnabled(), timeout=120_000)
    return view.result


def _hover_reads(qtbot, plot, want, row, col=0):
    g = plot.graphics

    def moved():
        hover(g, g.mapFromScene(plot.cell_center(row, col)))
        return want in plot.readout.text()

    qtbot.waitUntil(moved, timeout=5_000)


def _session_sweep(over, intervene, metric, prompts):
    s = Session.load("demo:lm", input_text=PROMPT)
    try:
        return s.sweep(over, intervene, metric, inputs=str(prompts))
    finally:
        s.close()


def _shot(win, qtbot, name, size):
    win.resize(*size)
    qtbot.waitUntil(lambda: win.width() == size[0] and win.height() == size[1])
    qtbot.wait(200)   # the docks settle into the new size
    save_shot(win, f"{name}_{size[0]}x{size[1]}")


def test_a_grid_over_a_prompt_file_equals_session_sweep(make_window, qtbot, tmp_path):
    prompts = _prompt_file(tmp_path)
    win = make_window(["demo:lm", "--input", PROMPT])
    view = open_sweep_dock(win, qtbot)
    fill_sweep(view, "layer=blocks.*; f=0.5,2", "{layer}=scale:{f}@pos=-1", metric=("logit", "e"),
               inputs=str(prompts))
    # before Run: every cell on every input
    qtbot.waitUntil(lambda: view.estimate.text().startswith(
        "12 runs (2 layer × 2 f, on each of 3 inputs)"), timeout=10_000)
    got = _run(win, qtbot, view)
    want = _session_sweep({"layer": "blocks.*", "f": "0.5,2"}, {"{layer}": "scale:{f}@pos=-1"},
                          "logit:'e'", prompts)
    assert got.axes == want.axes and got.inputs == want.inputs == PROMPTS
    # the same request on another session's runner thread: a stated tolerance
    np.testing.assert_allclose(got.values, want.values, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(got.spread, want.spread, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(got.per_input, want.per_input, rtol=1e-6, atol=1e-6)
    assert np.ptp(got.per_input, axis=0).max() > 0   # the inputs differ: a real spread
    plot = view.plot
    assert np.array_equal(plot.image.image, got.values)   # the heat map draws the means
    assert plot.estimated.isVisible() and plot.estimated.text() == "means over 3 inputs"
    assert "each cell is the mean over the inputs" in view.note.text()
    assert view.progress.maximum() == 12
    _hover_reads(qtbot, plot, f"layer blocks.1 · f 2: logit:'e' = {got.values[1, 1]:.6g} ± "
                              f"{got.spread[1, 1]:.3g} over 3 inputs", 1, 1)
    # a click on a cell runs its plan on the window's input
    g = plot.graphics
    before = win.last_result
    QTest.mouseClick(g.viewport(), Qt.MouseButton.LeftButton,
                     pos=g.mapFromScene(plot.cell_center(1, 1)))
    qtbot.waitUntil(lambda: win.last_result is not before and win.is_idle(), timeout=60_000)
    assert dict(win.last_result.plan.interventions) == dict(
        got.plan_of(layer="blocks.1", f=2.0).interventions)
    # Estimate over the set: each input's first-order estimates, averaged, as Session.sweep's
    before = view.result
    QTest.mouseClick(view.estimate_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: view.result is not before and win.is_idle()
                    and view.run_button.isEnabled(), timeout=60_000)
    s = Session.load("demo:lm", input_text=PROMPT)
    try:
        est = s.sweep({"layer": "blocks.*", "f": "0.5,2"}, {"{layer}": "scale:{f}@pos=-1"},
                      "logit:'e'", inputs=str(prompts), estimate=True)
    finally:
        s.close()
    np.testing.assert_allclose(view.result.estimates, est.estimates, rtol=1e-5, atol=1e-6)
    assert plot.estimated.text().startswith("estimates — first order")


def test_browse_fills_the_inputs_field_with_the_picked_set(make_window, qtbot, tmp_path):
    prompts = _prompt_file(tmp_path)
    win = make_window(["demo:lm", "--input", PROMPT])
    view = open_sweep_dock(win, qtbot)
    QTest.mouseClick(view.inputs_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: win.findChild(QFileDialog, "sweepInputsDialog") is not None)
    dlg = win.findChild(QFileDialog, "sweepInputsDialog")
    qtbot.waitExposed(dlg)
    assert "*.txt" in dlg.nameFilters()[0] and "*.png" in dlg.nameFilters()[0]
    name = dlg.findChild(QLineEdit, "fileNameEdit")
    name.setFocus()
    dlg.setDirectory(str(tmp_path))
    QTest.keyClicks(name, prompts.name)
    QTest.keyClick(name, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: view.inputs.text() == str(prompts))


def test_add_strengths_over_a_set_draw_the_mean_with_its_spread_and_the_best(make_window, qtbot,
                                                                              tmp_path, calls):
    prompts = _prompt_file(tmp_path)
    win = make_window(["demo:lm", "--input", PROMPT])
    view = open_sweep_dock(win, qtbot)
    fill_sweep(view, "alpha=linspace(0,8,5)", "blocks.0=add:v:{alpha}@pos=-1",
               vectors=f"v={VECTOR}", metric=("logit", "e"), inputs=str(prompts))
    qtbot.waitUntil(lambda: view.estimate.text().startswith("15 runs (5 alpha, on each of 3"),
                    timeout=10_000)
    calls.clear()
    got = _run(win, qtbot, view)
    # the set swept, its prompts read and the vector computed on the runner's thread only
    assert not [k for k in calls if k[1] == "gui"], dict(calls)
    assert calls[("sweep_over_inputs", "worker")] == 1
    assert calls[("diff_vector", "worker")] == 1   # once for the layer, not once a cell
    # the three prompts, the vector's two inputs and the window's own input (the run the
    # sweep rides on)
    assert calls[("parse_text", "worker")] == 3 + 2 + 1
    # the same sweep from Python: the vector computed as --vector computes it
    lm = win.session.model
    vec = diff_vector(lm.module, "blocks.0", VECTOR, "v", lm.example_input, lm.meaning.codec)
    want = _session_sweep({"alpha": "linspace(0,8,5)"},
                          {"blocks.0": lambda alpha: Add(vec, alpha, at=At(positions=[-1]))},
                          "logit:'e'", prompts)
    np.testing.assert_allclose(got.values, want.values, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(got.spread, want.spread, rtol=1e-6, atol=1e-6)
    assert got.spread.max() > 0
    plot = view.plot
    assert not plot.show_row.isVisible()   # one axis: a curve, nothing to pick
    x, y = plot.curve.getData()
    assert x.tolist() == [0.0, 2.0, 4.0, 6.0, 8.0] and np.array_equal(y, got.values)
    # the band: mean - spread to mean + spread
    assert plot.spread.band.isVisible()
    lo, hi = plot.spread.band_low.getData()[1], plot.spread.band_high.getData()[1]
    assert np.allclose(lo, got.values - got.spread) and np.allclose(hi, got.values + got.spread)
    best = int(np.argmax(got.values))
    assert plot.spread.best == best and plot.spread.best_mark.isVisible()
    assert plot.spread.best_mark.getData()[0].tolist() == [x[best]]
    _hover_reads(qtbot, plot, f"± {got.spread[best]:.3g} over 3 inputs (the largest mean)", best)
    _shot(win, qtbot, "curve_alpha", (1400, 900))
    _shot(win, qtbot, "curve_alpha", (1000, 650))


def test_dose_response_grid_of_layers_and_strengths_and_one_layers_curve(make_window, qtbot,
                                                                          tmp_path):
    prompts = _prompt_file(tmp_path)
    win = make_window(["demo:lm", "--input", PROMPT])
    view = open_sweep_dock(win, qtbot)
    fill_sweep(view, "layer=blocks.0,blocks.1; alpha=0,4,8", "{layer}=add:v:{alpha}@pos=-1",
               vectors=f"v={VECTOR}", metric=("logit", "e"), inputs=str(prompts))
    got = _run(win, qtbot, view)
    lm = win.session.model
    xs = [parse_input("text:" + p, lm.example_input, lm.meaning.codec) for p in PROMPTS]
    vecs = {p: diff_vector(lm.module, p, VECTOR, "v", lm.example_input, lm.meaning.codec)
            for p in ("blocks.0", "blocks.1")}
    per = np.stack([sweep(lm.module, x, {"layer": "blocks.0,blocks.1", "alpha": "0,4,8"},
                          {"{layer}": lambda layer, alpha: Add(vecs[layer], alpha,
                                                               at=At(positions=[-1]))},
                          "logit:'e'", meaning=lm.meaning).values for x in xs])
    np.testing.assert_allclose(got.values, per.mean(axis=0), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got.spread, per.std(axis=0), rtol=1e-5, atol=1e-5)
    plot = view.plot
    assert plot.show_row.isVisible() and plot.show_box.currentText() == HEAT_MAP
    assert plot.image.isVisible()
    # the heat map stars each layer's best strength: the column of its row's largest mean
    assert plot.row_best == {r: int(np.argmax(got.values[r])) for r in range(2)}
    assert plot.row_best_mark.isVisible()
    r, c = 0, plot.row_best[0]
    _hover_reads(qtbot, plot, f"± {got.spread[r, c]:.3g} over 3 inputs (the row's largest mean)",
                 r, c)
    _shot(win, qtbot, "dose_heat_map", (1400, 900))
    # one layer's dose-response: its row as a curve with its band and its best strength
    choose(plot.show_box, "curve of layer blocks.1")
    assert not plot.image.isVisible() and plot.curve.isVisible()
    x, y = plot.curve.getData()
    assert x.tolist() == [0.0, 4.0, 8.0] and np.array_equal(y, got.values[1])
    lo, hi = plot.spread.band_low.getData()[1], plot.spread.band_high.getData()[1]
    assert np.allclose(hi - lo, 2 * got.spread[1])
    best = int(np.argmax(got.values[1]))
    assert plot.spread.best == best and plot.spread.best_mark.getData()[0].tolist() == [x[best]]
    _hover_reads(qtbot, plot, f"layer blocks.1 · alpha {got.axes['alpha'][best]}: logit:'e' = "
                              f"{got.values[1, best]:.6g} ± {got.spread[1, best]:.3g} over 3 "
                              "inputs (the largest mean)", 1, best)
    # and back to the heat map
    choose(plot.show_box, HEAT_MAP)
    assert plot.image.isVisible() and not plot.curve.isVisible()
    choose(plot.show_box, "curve of layer blocks.0")
    _shot(win, qtbot, "dose_layer_curve", (1400, 900))


def test_a_set_or_vector_the_sweep_cannot_take_says_why_and_the_dock_stays_usable(
        make_window, qtbot, tmp_path):
    prompts = _prompt_file(tmp_path)
    win = make_window(["demo:lm", "--input", PROMPT])
    view = open_sweep_dock(win, qtbot)
    retype(view.axes, "alpha=0,2")
    retype(view.template, "blocks.0=add:v:{alpha}@pos=-1")
    choose(view.metric_box.kind, "max-abs-diff")
    # a set that is not there: said before Run, and in the banner on Run
    missing = str(tmp_path / "missing.txt")
    retype(view.inputs, missing)
    qtbot.waitUntil(lambda: "do not exist" in view.estimate.text(), timeout=10_000)
    QTest.mouseClick(view.run_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: "do not exist" in win.error_text(), timeout=10_000)
    assert view.result is None and view.run_button.isEnabled()
    # a vector the template names but Vectors does not define
    retype(view.inputs, str(prompts))
    qtbot.waitUntil(lambda: "'v'" in view.estimate.text(), timeout=10_000)
    QTest.mouseClick(view.run_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: "'v'" in win.error_text() and win.is_idle(), timeout=60_000)
    assert view.result is None and view.run_button.isEnabled()
    # an axis whose values differ between the inputs (their lengths): refused naming one
    retype(view.axes, "pos=all")
    retype(view.template, "blocks.0=zero@pos={pos}")
    QTest.mouseClick(view.run_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: "gives a different grid" in view.note.text() and win.is_idle()
                    and view.run_button.isEnabled(), timeout=60_000)
    # still usable: the same dock sweeps the set once the template is one it can take
    retype(view.axes, "alpha=0,2")
    retype(view.template, "blocks.0=add:v:{alpha}@pos=-1")
    retype(view.vectors, f"v={VECTOR}")
    got = _run(win, qtbot, view)
    assert got.per_input is not None and got.per_input.shape == (3, 2)


def test_cancel_stops_a_sweep_over_a_set_and_the_dock_stays_usable(make_window, qtbot, tmp_path):
    prompts = _prompt_file(tmp_path)
    win = make_window(["demo:lm", "--input", PROMPT])
    view = open_sweep_dock(win, qtbot)
    retype(view.axes, "f=linspace(0,1,3000)")
    retype(view.template, "blocks.0=scale:{f}")
    choose(view.metric_box.kind, "max-abs-diff")
    retype(view.inputs, str(prompts))
    QTest.mouseClick(view.run_button, Qt.MouseButton.LeftButton)
    # progress counts the runs, cells × inputs
    qtbot.waitUntil(lambda: view.progress.maximum() == 9_000 and view.progress.value() > 0,
                    timeout=60_000)
    QTest.mouseClick(view.cancel_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: win.is_idle() and view.run_button.isEnabled(), timeout=60_000)
    assert view.note.text() == "cancelled" and view.result is None
    retype(view.axes, "f=0,1")
    got = _run(win, qtbot, view)
    assert got.per_input.shape == (3, 2)
