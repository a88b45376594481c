"""``hookscope run ... --save-plots DIR``: the window's plots as files, headless."""

from __future__ import annotations

import csv
from pathlib import Path
import os
import subprocess
import sys

import pytest
import torch
from PySide6.QtGui import QImage

from hookscope.core import Plan, compare, load_model


def test_save_plots_writes_each_panel_and_its_data_without_a_display(tmp_path):
    out = tmp_path / "plots"
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY",
                                                            "QT_QPA_PLATFORM")}
    env["XDG_CONFIG_HOME"] = str(tmp_path / "cfg")
    p = subprocess.run([sys.executable, "-m", "hookscope.app.cli", "run", "demo:cnn",
                        "--capture", "conv1,fc", "--clamp", "conv1=-0.5:0.5", "--save-plots", str(out)],
                       capture_output=True, text=True, timeout=240, env=env)
    assert p.returncode == 0, p.stderr
    assert sorted(f.name for f in out.iterdir()) == sorted([
        "activations.png", "activations.svg", "conv1_call0.png", "conv1_call0.svg",
        "conv1_call0_histogram.csv", "conv1_call0_feature_maps.csv", "fc_call0.png", "fc_call0.svg",
        "fc_call0_histogram.csv", "fc_call0_bars.csv", "output.csv", "output.png", "output.svg"])
    for name in ("conv1_call0.png", "activations.png", "output.png"):
        img = QImage(str(out / name))
        assert not img.isNull() and img.width() >= 600
    # the output panel whole: its verdict, legend and plot, tall enough to read
    assert QImage(str(out / "output.png")).height() >= 400
    svg = (out / "output.svg").read_text()
    assert "changed the output" in svg and "with the intervention" in svg and "output index" in svg
    # the figure is every panel and the output, without the panels' controls
    figure = (out / "activations.svg").read_text()
    assert "conv1" in figure and "Top classes" in figure and ">log<" not in figure
    # The data files hold the run's numbers (the same as torch computes here).
    torch.manual_seed(0)
    lm = load_model("demo:cnn")
    r = compare(lm.module, lm.example_input, Plan(capture=("conv1", "fc"), clamp={"conv1": (-0.5, 0.5)}))
    rows = list(csv.reader(Path(out / "fc_call0_bars.csv").read_text().splitlines()))
    assert rows[0] == ["unit", "value", "without"]   # fc is downstream of the clamp
    fc = r.captures["fc"][0]
    assert [float(row[1]) for row in rows[1:]] == pytest.approx(fc.tensor.reshape(-1).tolist(), abs=1e-6)
    assert [float(row[2]) for row in rows[1:]] == pytest.approx(
        fc.baseline_tensor.reshape(-1).tolist(), abs=1e-6)
    rows = list(csv.reader(Path(out / "output.csv").read_text().splitlines()))
    assert [float(row[2]) for row in rows[1:]] == pytest.approx(
        torch.as_tensor(r.output_with).reshape(-1).tolist(), abs=1e-6)
    hist = list(csv.reader(Path(out / "conv1_call0_histogram.csv").read_text().splitlines()))
    assert sum(float(row[3]) for row in hist[1:] if row[0] == "after") == 8 * 8 * 8


def test_save_plots_into_an_impossible_folder_is_one_clear_error(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen", XDG_CONFIG_HOME=str(tmp_path / "cfg"))
    p = subprocess.run([sys.executable, "-m", "hookscope.app.cli", "run", "demo:clamp",
                        "--save-plots", str(blocker / "sub")], capture_output=True, text=True,
                       timeout=120, env=env)
    assert p.returncode == 2
    assert "--save-plots" in p.stderr and "Traceback" not in p.stderr
