"""Status-bar figures a learner can trust, counts per model, and a model with no example."""

import dataclasses

import torch
from PySide6.QtWidgets import QStatusBar
from torch import nn

from hookscope.app.status import StatusFields, overhead_text
from hookscope.core import Clamp, Plan, compare


def test_overhead_is_noise_below_three_percent():
    assert overhead_text(10.0, 10.2, 5) == "capture overhead: within noise (median of 5 runs)"
    assert overhead_text(0.1, 0.11, 4) == "capture overhead: within noise (median of 4 runs)"
    assert overhead_text(0.1, 0.6, 1).startswith("capture overhead: measuring (1 run")
    assert overhead_text(10.0, 12.0, 3) == "capture overhead: +2.0 ms (+20%) (median of 3 runs)"
    assert overhead_text(10.0, 8.0, 3).startswith("capture overhead: −2.0 ms")


def test_counts_and_timings_start_again_with_a_new_model(window, qtbot):
    runs = window.findChild(type(window.status.runs), "statusRuns")
    window.request_run()
    qtbot.waitUntil(window.is_idle, timeout=30_000)
    assert window.worker.runs_done >= 2
    window.load("demo:features")
    qtbot.waitUntil(lambda: window.loaded.spec == "demo:features" and window.last_result is not None
                    and window.is_idle(), timeout=30_000)
    assert runs.text() == "runs: 1"
    assert "measuring (1 run;" in window.status.overhead  # counts restarted
    assert "measuring (1 run;" in window.status.time.toolTip()


def test_model_without_example_input_says_what_to_type(make_window, qtbot, tmp_path):
    f = tmp_path / "mlp.py"
    f.write_text("import torch\n\ndef make():\n    return torch.nn.Linear(3, 2)\n")
    win = make_window([f"{f}:make"])
    qtbot.waitUntil(lambda: win.loaded is not None and win.is_idle(), timeout=30_000)
    assert win.run_bar.input_edit.text() == ""
    assert "no example input" in win.run_bar.input_edit.placeholderText()
    assert "no example input" in win.error_text() and "random:" in win.error_text()
    win.run_bar.set_input_text("[[1.0, 2.0, 3.0]]")
    win.request_run()
    qtbot.waitUntil(lambda: win.last_result is not None and win.is_idle(), timeout=30_000)
    assert win.banner.isHidden()


def test_stale_plots_are_called_stale(window, qtbot):
    window.set_live(False)
    window.session.intervene("0", Clamp(-0.1, 0.1))  # Live off: nothing runs
    assert "plots show the last run" in window.statusBar().currentMessage()
    window.run_bar.set_input_text("[[1.0, 2")
    window.request_run()
    qtbot.waitUntil(lambda: window.error_text() != "", timeout=30_000)
    assert "not a valid literal" in window.error_text()
    assert "still show the last successful run" in window.error_text()


def test_a_model_with_no_example_input_clears_the_last_models_figures(make_window, qtbot, tmp_path):
    # demo:cnn ran: its device, forward time and captures are in the status bar; a model
    # with no example input does not run, and must not inherit them.
    f = tmp_path / "mlp.py"
    f.write_text("import torch\n\ndef make():\n    return torch.nn.Linear(3, 2)\n")
    win = make_window(["demo:cnn"])
    qtbot.waitUntil(lambda: win.last_result is not None and win.is_idle(), timeout=30_000)
    assert win.status.time.text().startswith("forward:") and "captured" in win.status.memory.text()
    win.load(f"{f}:make")
    qtbot.waitUntil(lambda: win.loaded is not None and win.loaded.spec.endswith(":make")
                    and win.is_idle(), timeout=30_000)
    assert win.status.time.text() == "" and win.status.memory.text() == ""
    assert win.status.device.text() == "device: –" and win.status.runs.text().startswith("runs: 0")


def test_the_language_model_note_says_each_thing_once_and_claims_no_clamp(make_window, qtbot):
    win = make_window(["demo:lm"])
    qtbot.waitUntil(lambda: win.last_result is not None and win.is_idle(), timeout=30_000)
    note = win.note.text()
    assert note.count("Type") == 1 and "text:" in note
    assert not win.session.plan.clamp and "with the clamp" not in note


def test_a_first_result_that_reused_an_earlier_baseline_shows_no_forward_yet(qtbot):
    """After a new model, the first answers may reuse a baseline made before it opened (a
    session's first runs can): no forward of its own to time yet, and nothing raises."""
    bar = QStatusBar()
    qtbot.addWidget(bar)
    fields = StatusFields(bar)
    own = compare(nn.Sequential(nn.Linear(3, 2)), torch.ones(1, 3), Plan(capture=["0"]))
    reused = dataclasses.replace(own, baseline_reused=True)
    fields.reset()
    fields.show_result(reused)
    assert fields.time.text() == "forward: –"
    assert fields.overhead == "capture overhead: measuring (no forward without hooks yet)"
    assert fields.device.text() == "device: cpu"
    fields.show_result(own)
    assert fields.time.text().startswith("forward: ") and fields.time.text() != "forward: –"
    assert "measuring (median of 2 runs;" in fields.overhead
