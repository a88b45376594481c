"""View → Sweep, driven with real keys and clicks: axes from the tree's menu and the token
strip, the template from the Intervention panel, the metric from its list; the runs, time and
memory stated before Run; the heatmap's numbers equal sweep()'s, labelled by layer names and
token strings, with a hover read-out; a click on a cell runs that cell in the main view;
Cancel keeps the grid so far and the window usable; a one-axis sweep draws a curve."""

from __future__ import annotations

import numpy as np
import pytest
from PySide6.QtCore import QPoint, Qt
from PySide6.QtTest import QTest

from hookscope.core import At, Plan, Zero, parse_input
from hookscope.core.analyses import sweep
from hookscope.widgets.layer_tree_model import COL_LAYER
from support.mouse_events import hover
from support.window_menus import tree_context_menu
from support.keys import choose, retype
from support.sweep_dock import first_run_shown, open_sweep_dock

PROMPT = "text:the cat sat on the "
SOURCE = "text:the dog sat on the "


def _click_cell(view, row, col=0, button=Qt.MouseButton.LeftButton):
    g = view.plot.graphics
    pos = g.mapFromScene(view.plot.cell_center(row, col))
    assert g.viewport().rect().contains(pos)
    hover(g, pos)
    QTest.mouseClick(g.viewport(), button, pos=pos)
    return pos


def _hover_reads(qtbot, plot, want, row, col=0):
    """Move the mouse onto a cell until the read-out says ``want`` (the plot's layout may
    still settle after new axis labels: each try is a fresh move to where the cell is now)."""
    g = plot.graphics

    def moved():
        hover(g, g.mapFromScene(plot.cell_center(row, col)))
        return plot.readout.text() == want

    qtbot.waitUntil(moved, timeout=5_000)


def test_patch_grid_heatmap_equals_sweep_and_a_click_runs_the_cell(make_window, qtbot):
    win = make_window(["demo:lm", "--input", PROMPT])
    win.resize(1400, 900)
    open_sweep_dock(win, qtbot)
    view = win.sweep_view
    retype(view.axes, "layer=blocks.*; pos=14:19")
    retype(view.template, "{layer}=patch@pos={pos}")
    retype(view.source, SOURCE)
    choose(view.metric_box.kind, "logit-diff")
    assert view.metric_box.tokens[1].isVisible()
    # 'm' completes to the model's prediction of that token (picked: its id); "'r'" is typed
    retype(view.metric_box.tokens[0].lineEdit(), "m")
    retype(view.metric_box.tokens[1].lineEdit(), "'r'")
    m_id = win.session.model.meaning.codec.encode("m")[0]
    assert view.metric_box.tokens[0].currentText().startswith(f"m  #{m_id} p=")
    metric = f"logit-diff:#{m_id},'r'"
    assert view.metric_box.text() == metric
    # Before Run: the number of runs, the time from the last forward, the memory.
    qtbot.waitUntil(lambda: view.estimate.text().startswith("10 runs (2 layer × 5 pos)"),
                    timeout=10_000)
    assert "forwards of" in view.estimate.text() and " held" in view.estimate.text()
    # the source activations it keeps: two blocks' outputs as the last run saw them
    lm = win.session.model
    nbytes = sum(4 * np.prod(win.session.tree.find(p).output_shape) for p in ("blocks.0", "blocks.1"))
    assert f"(source activations of 2 layers: {round(nbytes / 1024)} KB)" in view.estimate.text()
    QTest.mouseClick(view.run_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: view.result is not None and view.run_button.isEnabled(),
                    timeout=60_000)
    lm = win.session.model
    x = parse_input(PROMPT, lm.example_input, lm.meaning.codec)
    want = sweep(lm.module, x, {"layer": "blocks.*", "pos": "14:19"},
                 {"{layer}": f"patch:{SOURCE}@pos={{pos}}"}, "logit-diff:'m','r'",
                 meaning=lm.meaning)
    got = view.result
    assert np.array_equal(got.values, want.values)
    plot = view.plot
    assert np.array_equal(plot.image.image, want.values)   # what the heatmap draws
    assert plot.left.labels == ["blocks.0", "blocks.1"] == want.axes["layer"]
    assert plot.bottom.labels == want.axes["pos"]
    assert want.axes["pos"][1:3] == ["15 't'", "16 'h'"]   # labelled by the token strings
    assert view.progress.isHidden() and view.progress.value() == view.progress.maximum() == 10
    # Hover read-out: layer name, token string, value.
    # the picked token is named by its text, not its id, in the title and the read-out
    assert plot.plot.titleLabel.text.startswith("logit-diff:'m','r' by layer × pos")
    _hover_reads(qtbot, plot, f"layer blocks.1 · pos {want.axes['pos'][4]}: "
                              f"logit-diff:'m','r' = {want.values[1, 4]:.6g} "
                              f"(baseline {want.baseline:.6g})",
                 1, 4)
    # A click on a cell runs it in the main view: its plan, its layer captured.
    before = win.last_result
    _click_cell(view, 1, 4)
    qtbot.waitUntil(lambda: win.last_result is not before and win.is_idle(), timeout=60_000)
    shown = win.last_result
    assert dict(shown.plan.interventions) == dict(got.plan_of(layer="blocks.1", pos=18).interventions)
    assert "blocks.1" in shown.captures
    assert np.array_equal(shown.output_with.numpy(),
                          got.run_cell(layer="blocks.1", pos=18).output_with.numpy())
    assert plot.chosen == (1, 4) and plot.marker.isVisible()
    assert win.tree.selected_path() == "blocks.1" and win.session.history.can_undo


def test_axes_from_the_tree_menu_and_the_token_strip(make_window, qtbot):
    win = make_window(["demo:lm", "--input", PROMPT])
    first_run_shown(win, qtbot)
    menu = tree_context_menu(qtbot, win, "blocks.0.mlp")
    action = next(a for a in menu.actions() if a.text() == "Sweep over blocks.*.mlp (2 layers)")
    QTest.mouseClick(menu, Qt.MouseButton.LeftButton, pos=menu.actionGeometry(action).center())
    qtbot.waitUntil(win.sweep_dock.isVisible)
    view = win.sweep_view
    assert view.axes.text() == "layer=blocks.*.mlp; pos=all"
    menu = tree_context_menu(qtbot, win, "head")
    add = next(a for a in menu.actions() if a.objectName() == "actionSweepAdd")
    QTest.mouseClick(menu, Qt.MouseButton.LeftButton, pos=menu.actionGeometry(add).center())
    qtbot.waitUntil(lambda: view.axes.text() == "layer=blocks.*.mlp,head; pos=all")
    strip = view.tokens
    qtbot.waitUntil(lambda: strip.count() == 19 and strip.isVisible())
    for i in (4, 8):
        QTest.mouseClick(strip.viewport(), Qt.MouseButton.LeftButton, pos=strip.token_rect_center(i))
    assert view.axes.text() == "layer=blocks.*.mlp,head; pos=4,8"
    QTest.mouseClick(strip.viewport(), Qt.MouseButton.LeftButton, pos=strip.token_rect_center(4))
    assert view.axes.text() == "layer=blocks.*.mlp,head; pos=8"
    retype(view.template, "{layer}=zero@pos={pos}")
    qtbot.waitUntil(lambda: view.estimate.text().startswith("3 runs (3 layer × 1 pos)"),
                    timeout=10_000)


def test_template_from_the_intervention_panel(make_window, qtbot):
    win = make_window(["demo:lm", "--input", PROMPT])
    open_sweep_dock(win, qtbot)
    view = win.sweep_view
    plan = win.session.current_plan()
    win.session.set_plan(Plan(capture=plan.capture, interventions={
        "blocks.1.mlp": Zero(at=At(positions=(3,)))}))
    w = win.tree
    idx = w.proxy.mapFromSource(w.model.index_for_path("blocks.1.mlp", COL_LAYER))
    w.view.scrollTo(idx)
    rect = w.view.visualRect(idx)
    QTest.mouseClick(w.view.viewport(), Qt.MouseButton.LeftButton,
                     pos=QPoint(rect.left() + 12, rect.center().y()))
    qtbot.waitUntil(lambda: win.intervention_panel.path() == "blocks.1.mlp")
    retype(view.axes, "layer=blocks.*; pos=all")
    QTest.mouseClick(view.from_editor, Qt.MouseButton.LeftButton)
    assert view.template.text() == "{layer}=zero@pos={pos}"
    retype(view.axes, "unit=0:4")
    QTest.mouseClick(view.from_editor, Qt.MouseButton.LeftButton)
    assert view.template.text() == "blocks.1.mlp=zero@pos=3@units={unit}"


def test_a_template_without_its_source_says_so_in_the_banner(make_window, qtbot):
    win = make_window(["demo:lm"])
    open_sweep_dock(win, qtbot)
    view = win.sweep_view
    retype(view.axes, "layer=blocks.*")
    retype(view.template, "{layer}=patch")
    retype(view.source, "")
    qtbot.waitUntil(lambda: "source input" in view.estimate.text(), timeout=10_000)
    QTest.mouseClick(view.run_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: "source input" in win.error_text(), timeout=60_000)
    assert view.result is None and view.run_button.isEnabled()


def test_cancel_keeps_the_grid_so_far_and_the_window_usable(make_window, qtbot):
    win = make_window(["demo:lm"])
    open_sweep_dock(win, qtbot)
    view = win.sweep_view
    retype(view.axes, "f=linspace(0,1,9000)")
    retype(view.template, "blocks.0=scale:{f}")
    choose(view.metric_box.kind, "max-abs-diff")
    run_at, cancel_at = view.run_button.geometry(), view.cancel_button.geometry()
    QTest.mouseClick(view.run_button, Qt.MouseButton.LeftButton)
    # the curve fills in while the sweep runs
    qtbot.waitUntil(lambda: view.result is not None
                    and np.isfinite(view.result.values).sum() >= 5, timeout=60_000)
    assert np.isnan(view.result.values).any()
    assert "ETA" in view.progress.format() and view.progress.isVisible()
    # Run and Cancel stay where they were (the bar had taken Cancel's place), and the
    # note counts the runs instead of saying "starting" all along
    qtbot.waitUntil(lambda: view.note.text().startswith("running: "))
    for button, before in ((view.run_button, run_at), (view.cancel_button, cancel_at)):
        assert (button.x(), button.width()) == (before.x(), before.width())
    assert "starting" not in view.note.text() and view.note.text().endswith(" of 9000 runs")
    assert view.cancel_button.isEnabled() and not view.run_button.isEnabled()
    QTest.mouseClick(view.cancel_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(win.is_idle, timeout=60_000)
    assert view.note.text().startswith("cancelled after ")
    part = view.result
    done = int(np.isfinite(part.values).sum())
    assert 5 <= done < 9000 and view.run_button.isEnabled() and view.progress.isHidden()
    assert np.isfinite(part.values[:done]).all()
    for m in win.session.model.module.modules():
        assert not m._forward_hooks and not m._forward_pre_hooks
    # The cells that ran equal a sweep over those values; the curve draws them.
    lm = win.session.model
    x = parse_input("example", lm.example_input, lm.meaning.codec)
    want = sweep(lm.module, x, {"f": part.coords["f"][:5]}, {"blocks.0": "scale:{f}"},
                 "max-abs-diff", meaning=lm.meaning)
    assert np.array_equal(part.values[:5], want.values)
    cx, cy = view.plot.curve.getData()
    assert np.array_equal(cx, np.asarray(part.coords["f"])) and np.array_equal(cy[:done],
                                                                              part.values[:done])
    # Still usable: a click on the third point runs the point under the mouse (9000 points
    # share the plot's width: one of the first few).
    before = win.last_result
    _click_cell(view, 2)
    qtbot.waitUntil(lambda: win.last_result is not before and win.is_idle(), timeout=60_000)
    row, _ = view.plot.chosen
    assert row < 10 and np.isfinite(part.values[row])
    assert dict(win.last_result.plan.interventions) == dict(part.plan_of(
        f=part.coords["f"][row]).interventions)


@pytest.mark.parametrize("metric", ["max-abs-diff"])
def test_cnn_units_grid_and_a_strength_curve(make_window, qtbot, metric):
    win = make_window(["demo:cnn"])
    open_sweep_dock(win, qtbot)
    view = win.sweep_view
    retype(view.axes, "layer=conv1,conv2; unit=0:4")
    retype(view.template, "{layer}=zero@units={unit}")
    choose(view.metric_box.kind, metric)
    QTest.keyClick(view.template, Qt.Key.Key_Return)   # Enter in a field runs the sweep
    qtbot.waitUntil(lambda: view.result is not None and win.is_idle(), timeout=60_000)
    cnn = win.session.model
    want = sweep(cnn.module, cnn.example_input, {"layer": "conv1,conv2", "unit": "0:4"},
                 {"{layer}": "zero@units={unit}"}, metric, meaning=cnn.meaning)
    assert np.array_equal(view.plot.image.image, want.values)
    assert view.plot.left.labels == ["conv1", "conv2"]
    assert view.plot.bottom.labels == ["0", "1", "2", "3"]
    # One axis: a curve over the factor's values, the baseline-free metric on the y axis.
    retype(view.axes, "factor=linspace(0,2,5)")
    retype(view.template, "conv2=scale:{factor}")
    QTest.mouseClick(view.run_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: view.result is not None and view.result.values.ndim == 1
                    and win.is_idle() and view.run_button.isEnabled(), timeout=60_000)
    curve = sweep(cnn.module, cnn.example_input, {"factor": "linspace(0,2,5)"},
                  {"conv2": "scale:{factor}"}, metric, meaning=cnn.meaning)
    x, y = view.plot.curve.getData()
    assert x.tolist() == [0.0, 0.5, 1.0, 1.5, 2.0] and np.array_equal(y, curve.values)
    assert view.plot.curve.isVisible() and not view.plot.image.isVisible()
    _hover_reads(qtbot, view.plot, f"factor 0.5: {metric} = {curve.values[1]:.6g}", 1)


def test_the_windows_own_cancel_stops_the_sweep_and_the_dock_says_so(make_window, qtbot):
    win = make_window(["demo:lm"])
    open_sweep_dock(win, qtbot)
    view = win.sweep_view
    retype(view.axes, "layer=blocks.*; f=linspace(0,1,4000)")
    retype(view.template, "{layer}=scale:{f}")
    QTest.mouseClick(view.run_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: view.result is not None
                    and np.isfinite(view.result.values).sum() >= 3, timeout=60_000)
    QTest.mouseClick(win.run_bar.cancel_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: view.run_button.isEnabled(), timeout=60_000)
    assert view.note.text().startswith("the sweep stopped after ")
    assert view.result.values.shape == (2, 4000) and np.isfinite(view.result.values).sum() >= 3
    assert not view.cancel_button.isEnabled() and view.progress.isHidden()


@pytest.fixture(scope="module")
def gpt2_spec(tmp_path_factory):
    pytest.importorskip("transformers", reason="the hf extra (transformers) is not installed")
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parents[1] / "core"))
    import hf_models

    return f"hf:{hf_models.gpt2(tmp_path_factory.mktemp('sweep_gpt2') / 'g')}"


def test_a_hugging_face_gpt2_grid_units_and_curve_from_the_window(make_window, qtbot, gpt2_spec):
    """The three sweeps of a patching study on a Hugging Face GPT-2 (config and tokenizer made
    here), typed into the dock and run with Enter/Run: each grid equals sweep()'s."""
    prompt, source = "text:the cat sat on the", "text:the cat sat on a"
    win = make_window([gpt2_spec, "--input", prompt])
    win.resize(1400, 900)
    open_sweep_dock(win, qtbot)
    view = win.sweep_view
    lm = win.session.model
    x = parse_input(prompt, lm.example_input, lm.meaning.codec)
    cases = [
        ({"layer": "transformer.h.*", "pos": "all"}, "layer=transformer.h.*; pos=all",
         "{layer}=patch@pos={pos}", {"{layer}": f"patch:{source}@pos={{pos}}"}),
        ({"layer": "transformer.h.*.mlp", "unit": "0:4"}, "layer=transformer.h.*.mlp; unit=0:4",
         "{layer}=zero@units={unit}", {"{layer}": "zero@units={unit}"}),
        ({"f": "linspace(0,2,5)"}, "f=linspace(0,2,5)", "transformer.h.1=scale:{f}",
         {"transformer.h.1": "scale:{f}"}),
    ]
    retype(view.source, source)
    choose(view.metric_box.kind, "kl")
    for over, axes, template, intervene in cases:
        before = view.result
        retype(view.axes, axes)
        retype(view.template, template)
        QTest.mouseClick(view.run_button, Qt.MouseButton.LeftButton)
        qtbot.waitUntil(lambda: view.result is not None and view.result is not before
                        and win.is_idle() and view.run_button.isEnabled(), timeout=120_000)
        want = sweep(lm.module, x, over, intervene, "kl", meaning=lm.meaning)
        got = view.result
        assert got.axes == want.axes
        np.testing.assert_allclose(got.values, want.values, rtol=1e-6, atol=1e-9)
        if want.values.ndim == 2:
            np.testing.assert_allclose(view.plot.image.image, want.values, rtol=1e-6, atol=1e-9)
            assert view.plot.left.labels == want.axes[next(iter(over))]
        else:
            assert np.allclose(view.plot.curve.getData()[1], want.values, rtol=1e-6, atol=1e-9)
    assert view.result.values[2] < 1e-6   # factor 1 leaves the output as it was


def test_after_a_batched_sweep_the_estimate_is_its_pace_not_a_forward_per_cell(make_window, qtbot):
    """A batched sweep runs its cells as rows of a few forwards: the next estimate of the
    same grid is what that sweep took, not the pace of one batched forward times the cells."""
    from hookscope.widgets.sweep_view import seconds

    win = make_window(["demo:lm", "--input", PROMPT])
    open_sweep_dock(win, qtbot)
    view = win.sweep_view
    retype(view.axes, "layer=blocks.*; pos=0:19")
    retype(view.template, "{layer}=zero@pos={pos}")
    choose(view.metric_box.kind, "kl")
    QTest.mouseClick(view.run_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: view.result is not None and view.run_button.isEnabled()
                    and win.is_idle(), timeout=60_000)
    got = view.result
    assert got.cells == 38 and got.batched == 38 and sum(got.forwards.values()) < got.cells
    retype(view.axes, "layer=blocks.*; pos=0:18")   # the same grid less one position
    retype(view.axes, "layer=blocks.*; pos=0:19")
    took = got.timings_ms["total"] / 1e3
    qtbot.waitUntil(lambda: "the last sweep's pace" in view.estimate.text(), timeout=10_000)
    text = view.estimate.text()
    assert text.startswith("38 runs (2 layer × 19 pos)")
    assert f"about {seconds(took)} ({got.timings_ms['total'] / 38:.2f} ms a run" in text


def test_the_axes_it_proposes_are_the_models_own_blocks(make_window, qtbot, gpt2_spec):
    win = make_window([gpt2_spec, "--input", "text:the cat sat on the"])
    open_sweep_dock(win, qtbot)
    view = win.sweep_view
    assert view.axes.text() == "layer=transformer.h.*; pos=all"
    # with the source input the proposed patch needs, the sweep can run as proposed
    retype(view.source, "text:the cat sat on a")
    n = win.last_result.inputs["input_ids"].shape[1] if isinstance(
        win.last_result.inputs, dict) else win.last_result.inputs.shape[1]
    qtbot.waitUntil(lambda: view.estimate.text().startswith(f"{2 * n} runs (2 layer × {n} pos)"),
                    timeout=10_000)
    assert view.estimate.styleSheet() == ""   # not red
    # axes the person typed stay when another model opens
    retype(view.axes, "layer=transformer.h.0; pos=all")
    win.load("demo:lm")
    qtbot.waitUntil(lambda: win.session.model.spec == "demo:lm" and win.is_idle(), timeout=60_000)
    assert view.axes.text() == "layer=transformer.h.0; pos=all"
