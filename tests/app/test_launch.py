"""``hookscope [ARGV]``: create_window as the command line, --screenshot, startup errors."""

import os
import subprocess
import sys

import pytest
from PySide6.QtGui import QImage

from hookscope.app.launch import build_parser


def run_cli(args, tmp_path, timeout=240):
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen", XDG_CONFIG_HOME=str(tmp_path / "cfg"))
    return subprocess.run([sys.executable, "-m", "hookscope.app.cli", *args], capture_output=True,
                          text=True, timeout=timeout, env=env)


def test_screenshot_writes_a_1400x900_png(tmp_path):
    out = tmp_path / "cnn.png"
    p = run_cli(["demo:cnn", "--capture", "conv1,fc", "--clamp", "conv1=-0.5:0.5",
                 "--screenshot", str(out)], tmp_path)
    assert p.returncode == 0, p.stderr
    img = QImage(str(out))
    assert not img.isNull()
    assert (img.width(), img.height()) == (1400, 900)


def test_screenshot_with_a_bad_spec_exits_2_with_the_message(tmp_path):
    out = tmp_path / "x.png"
    p = run_cli(["demo:nope", "--screenshot", str(out)], tmp_path)
    assert p.returncode == 2
    assert "unknown demo" in p.stderr and "Traceback" not in p.stderr
    assert not out.exists()


def test_gui_main_screenshot_in_process(qapp, tmp_path):
    from hookscope.app.launch import gui_main

    out = tmp_path / "default.png"
    assert gui_main(["--screenshot", str(out), "--size", "1000x650"]) == 0
    img = QImage(str(out))
    assert (img.width(), img.height()) == (1000, 650)


def test_size_must_be_width_x_height(capsys):
    from hookscope.app.arg_parser import UsageError
    from hookscope.app.cli import main as cli_main

    for bad in ("1000", "ax650", "10x10", "1000x650x2"):
        with pytest.raises(UsageError, match="WIDTHxHEIGHT"):  # one line, status 2 in main()
            build_parser().parse_args(["--size", bad])
        assert cli_main(["--size", bad]) == 2
        err = capsys.readouterr().err
        assert "WIDTHxHEIGHT" in err and len(err.strip().splitlines()) == 1
    assert build_parser().parse_args(["--size", "2560X1440"]).size == (2560, 1440)


def test_help_lists_every_input_form():
    text = build_parser().format_help()
    for form in ("example", "[[1.0, 2.0, 3.0]]", "random:1x3x32x32", "file.npy", "digit.png",
                 ":invert", "demo:NAME", "model.pt2", "--size"):
        assert form in text, form


def test_help_names_every_model_source_the_text_input_and_session_files():
    # the epilog's own lists, not only the one-line --input/SPEC helps above them
    epilog = build_parser().epilog
    for form in ("hf:NAME_OR_DIR", "torchvision:NAME", "timm:NAME", "text:PROMPT",
                 ".hookscope.json"):
        assert form in epilog, form
    assert ".hookscope.json" in build_parser().description


def test_create_window_reads_the_command_line(make_window, qtbot):
    win = make_window(["demo:features", "--capture", "fc2", "--clamp", "fc1=-1:1",
                       "--input", "[[4.0, 3.0, 2.0, 1.0]]"])
    qtbot.waitUntil(lambda: win.last_result is not None and win.is_idle(), timeout=30_000)
    r = win.last_result
    assert r.plan.capture == ("fc2",) and dict(r.plan.clamp) == {"fc1": (-1.0, 1.0)}
    assert win.run_bar.input_text() == "[[4.0, 3.0, 2.0, 1.0]]"
    assert set(r.captures) == {"fc2"}


def test_command_line_mistakes_show_in_the_window(make_window, qtbot):
    win = make_window(["--clamp", "0=oops", "--device", "cuda:7"])
    qtbot.waitUntil(lambda: win.last_result is not None and win.is_idle(), timeout=30_000)
    text = win.error_text()
    assert "--clamp '0=oops'" in text and "cuda" in text.lower()
    assert win.loaded.spec == "demo:clamp" and win.run_bar.device() == "cpu"


def test_stats_only_keeps_no_tensors(make_window, qtbot):
    win = make_window(["demo:cnn", "--capture", "conv1", "--stats-only"])
    qtbot.waitUntil(lambda: win.last_result is not None and win.is_idle(), timeout=30_000)
    rec = win.last_result.captures["conv1"][0]
    assert rec.tensor is None and rec.stats is not None


def test_parser_has_screenshot_and_model_options():
    ns = build_parser().parse_args(["demo:cnn", "--screenshot", "a.png", "--live"])
    assert ns.spec == "demo:cnn" and ns.screenshot == "a.png" and ns.live


@pytest.mark.skipif(not sys.platform.startswith("linux"),
                    reason="only X11/Wayland platforms have a display to be missing")
def test_no_display_is_a_clear_error_not_an_abort():
    env = {k: v for k, v in os.environ.items()
           if k not in ("DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM")}
    r = subprocess.run([sys.executable, "-m", "hookscope.app.cli", "demo:clamp"], env=env,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "no display" in r.stderr and "Traceback" not in r.stderr


def test_a_command_line_that_only_clamps_still_shows_the_demos_captures_and_the_clamped_layer(
        make_window, qtbot):
    from hookscope.app.demo_setup import default_plan

    win = make_window(["demo:cnn", "--clamp", "conv2=-0.5:0.5"])
    qtbot.waitUntil(lambda: win.last_result is not None and win.is_idle(), timeout=30_000)
    shown = {path for path, _ in win.panel.panels()}
    assert set(default_plan("demo:cnn").capture) | {"conv2"} <= shown
    conv2 = win.last_result.captures["conv2"][0]
    assert float(conv2.tensor.max()) <= 0.5 and conv2.pre_tensor is not None  # before | after
