"""``--screenshot`` of a plan with an intervention alarm: the alarm is news about the plan,
not a failure. The picture is written with the alarm in its banner, the alarm is said as a
note on stderr, and the exit status is 0 (it used to be 2, with no picture)."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
from PIL import Image

ALARM_AMBER = (0xFF, 0xF4, 0xD6)  # the banner's background when it shows an alarm


def test_a_screenshot_with_an_alarm_is_written_with_the_alarm_in_its_banner(tmp_path):
    out = tmp_path / "shot.png"
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen", XDG_CONFIG_HOME=str(tmp_path / "cfg"))
    env.pop("DISPLAY", None)
    env.pop("WAYLAND_DISPLAY", None)
    p = subprocess.run([sys.executable, "-m", "hookscope.app.cli", "demo:cnn", "--clamp",
                        "conv1=-1000:1000", "--screenshot", str(out), "--size", "1200x800"],
                       capture_output=True, text=True, timeout=240, env=env)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == str(out)
    assert p.stderr.splitlines() == [
        "hookscope: note: intervention alarm: conv1: clamp(-1000, 1000) changed nothing: every "
        "value it touched was already what it set"], p.stderr
    with Image.open(out) as img:
        img.verify()  # a whole PNG
    with Image.open(out) as img:
        assert img.size == (1200, 800)
        pixels = np.asarray(img.convert("RGB"))
    amber = int((pixels == np.array(ALARM_AMBER, dtype=np.uint8)).all(axis=-1).sum())
    assert amber > 5_000  # the banner, drawn in the picture (a strip some 700 x 25 pixels)
