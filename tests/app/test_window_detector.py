"""demo:detector in the window and in --save-plots: its boxes on the picture, without and with."""

from __future__ import annotations

from PySide6.QtGui import QImage

from hookscope.app.plot_files import save_plots
from hookscope.core import Plan, compare, load_model
from hookscope.core.plan.interventions import Scale
from hookscope.widgets.detection_view import WITH_COLOUR, WITHOUT_COLOUR


def test_window_draws_the_detector_boxes_without_and_with(make_window, qtbot):
    win = make_window(["demo:detector", "--intervene", "backbone.conv1=scale:0.5"])
    qtbot.waitUntil(lambda: win.last_result is not None and win.is_idle(), timeout=30_000)
    view = win.outputs.meaning_view.detections
    assert view.isVisible()
    r = win.last_result
    for which, out in (("without", r.output_without), ("with", r.output_with)):
        want = sorted(tuple(b) for b, s in zip(out[0]["boxes"].tolist(), out[0]["scores"].tolist())
                      if s >= 0.5)
        assert sorted(tuple(b["box"]) for b in view.canvas.shown(which)) == want
    assert len(view.canvas.shown("with")) < len(view.canvas.shown("without"))
    assert "changed the detections" in win.outputs.summary.text()


def test_save_plots_writes_the_boxes_on_the_picture(qtbot, tmp_path):
    lm = load_model("demo:detector")
    r = compare(lm.module, lm.example_input, Plan(interventions={"backbone.conv1": Scale(factor=0.5)}))
    written = save_plots(r, tmp_path, lm.meaning, lm.example_input)
    assert tmp_path / "detections.png" in written and tmp_path / "output.png" in written
    img = QImage(str(tmp_path / "detections.png"))
    assert not img.isNull() and img.width() >= 600
    colours = {img.pixel(x, y) for x in range(0, img.width(), 2) for y in range(0, img.height(), 2)}
    assert WITHOUT_COLOUR.rgb() in colours and WITH_COLOUR.rgb() in colours
    # output.png/.svg is the output panel as the window shows a detector: boxes, not a
    # series of flattened numbers over an "output index"
    svg = (tmp_path / "output.svg").read_text()
    assert "boxes" in svg and "output index" not in svg
    out = QImage(str(tmp_path / "output.png"))
    colours = {out.pixel(x, y) for x in range(0, out.width(), 2) for y in range(0, out.height(), 2)}
    assert WITHOUT_COLOUR.rgb() in colours and WITH_COLOUR.rgb() in colours


def test_help_names_every_demo(capsys):
    import pytest

    from hookscope.app.cli import main
    from hookscope.core.demos.demo_models import DEMOS

    with pytest.raises(SystemExit) as exit_:
        main(["--help"])
    assert exit_.value.code == 0
    text = " ".join(capsys.readouterr().out.split())  # argparse wraps lines
    assert f"demo:NAME ({', '.join(DEMOS)})" in text
    assert "detector" in DEMOS
