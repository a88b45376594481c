"""``hookscope run ... --save-plots DIR``: the window's plots as files, headless; and
``hookscope sweep --inputs ... --save-plots``: the curve's band of mean ± spread."""

from __future__ import annotations

import csv
from pathlib import Path
import os
import subprocess
import sys

import numpy as np
import pytest
import torch
from PySide6.QtGui import QColor, QImage

from hookscope.app.cli import main
from hookscope.app.sweep_plots import BEST_COLOUR, SPREAD_FILL, best_point, curve_frame
from hookscope.core import Plan, compare, load_model, parse_input
from hookscope.core.analyses import sweep


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


def test_sweep_curve_over_an_input_set_draws_the_spread_band_and_stars_the_best(tmp_path,
                                                                                capsys):
    prompts = ["the cat sat on the ", "a dog", "the quick brown fox jumps"]
    f = tmp_path / "prompts.txt"
    f.write_text("\n".join(prompts) + "\n")
    args = ["--over", "f=linspace(0,3,4)", "--intervene", "blocks.0=scale:{f}@pos=-1",
            "--metric", "logit:e"]
    assert main(["sweep", "demo:lm", "--inputs", str(f), *args, "--save-plots",
                 str(tmp_path / "set")]) == 0
    assert main(["sweep", "demo:lm", "--input", "text:" + prompts[0], *args, "--save-plots",
                 str(tmp_path / "one")]) == 0
    capsys.readouterr()
    # the same sweep here, to know where its numbers fall in the picture
    lm = load_model("demo:lm")
    xs = [parse_input("text:" + t, lm.example_input, lm.meaning.codec) for t in prompts]
    res = sweep(lm.module, None, {"f": "linspace(0,3,4)"}, {"blocks.0": "scale:{f}@pos=-1"},
                "logit:e", meaning=lm.meaning, input_set=xs)
    frame = curve_frame(res)
    img = QImage(str(tmp_path / "set" / "sweep_curve.png"))
    assert not img.isNull()
    mean, sd = res.values, res.spread
    band = QColor(*SPREAD_FILL)
    assert sd.max() > 0
    band_checked = 0
    for i in range(len(mean)):
        top, bottom = frame.point(i, mean[i] + sd[i])[1], frame.point(i, mean[i] - sd[i])[1]
        if bottom - top < 16:
            continue   # too thin to look inside beside the curve's dot and bar
        band_checked += 1
        # beside the point's bar and dot, on the side where the band goes on
        x = round(frame.point(i, mean[i])[0]) + (6 if i < len(mean) - 1 else -6)
        inside = [img.pixelColor(x, round(top + (bottom - top) * t)) for t in (0.15, 0.85)]
        assert all(c == band for c in inside), (i, inside)
        # just outside the band: white
        for y in (top - 6, bottom + 6):
            assert img.pixelColor(x, round(y)) == QColor("white"), (i, y)
    assert band_checked >= 2
    # the largest mean starred in red at its point
    best = best_point(res)
    assert best == int(np.argmax(mean))
    bx, by = frame.point(best, mean[best])
    red = QColor(*BEST_COLOUR)
    assert any(img.pixelColor(round(bx) + dx, round(by) + dy) == red
               for dx in range(-3, 4) for dy in range(-3, 4))
    # one input: no band, no star, where the set's picture has them
    one = QImage(str(tmp_path / "one" / "sweep_curve.png"))
    colours = {one.pixelColor(x, y).rgb() for x in range(one.width()) for y in range(one.height())}
    assert band.rgb() not in colours and red.rgb() not in colours
