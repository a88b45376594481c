"""What reaches stderr: Hookscope's one line on a refusal, nothing at all on success.

A hostile pickle given as ``--weights`` or ``--input`` is refused without running
code; torch's safe unpickler used to add its own two-line warning about the pickle
protocol above the refusal. Drawing offscreen (``--save-plots``, ``--screenshot``)
used to print Qt's "This plugin does not support propagateSizeHints()" notes.
Each case runs in a subprocess: stderr as a terminal would see it.
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from hostile_files import MarkerPayload, pickle_payload

MODEL = '''
import torch
from torch import nn


def build():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(3, 4), nn.Linear(4, 2)), torch.tensor([[1.0, 2.0, 3.0]])
'''


def _env(tmp_path: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY")}
    env.update(QT_QPA_PLATFORM="offscreen", XDG_CONFIG_HOME=str(tmp_path / "cfg"))
    env.pop("PYTHONWARNINGS", None)
    return env


def _hookscope(tmp_path: Path, argv: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "hookscope.app.cli", *argv], cwd=tmp_path,
                          env=_env(tmp_path), capture_output=True, text=True, timeout=240)


@pytest.mark.parametrize("flag", ["--weights", "--input"])
@pytest.mark.parametrize("kind", ["pickle", "legacy"])
def test_a_hostile_pickle_is_refused_in_one_line(tmp_path, flag, kind):
    (tmp_path / "net.py").write_text(MODEL)
    marker = tmp_path / "ran"
    evil = tmp_path / "evil.pt"
    if kind == "pickle":  # plain pickle.dumps: protocol 4, which torch's reader warns about
        evil.write_bytes(pickle_payload(marker))
    else:
        torch.save({"w": MarkerPayload(marker)}, evil, _use_new_zipfile_serialization=False,
                   pickle_protocol=pickle.HIGHEST_PROTOCOL)
    p = _hookscope(tmp_path, ["run", "net.py:build", flag, str(evil)])
    assert p.returncode == 2
    assert p.stderr.count("\n") == 1 and p.stderr.startswith("hookscope: error: "), p.stderr
    assert "weights_only" in p.stderr
    assert not marker.exists()


def test_save_plots_and_screenshot_say_nothing_on_stderr(tmp_path):
    p = _hookscope(tmp_path, ["run", "demo:cnn", "--capture", "conv1", "--save-plots", "plots"])
    assert p.returncode == 0 and p.stderr == ""
    assert (tmp_path / "plots" / "activations.png").is_file()
    p = _hookscope(tmp_path, ["demo:cnn", "--screenshot", "shot.png", "--size", "900x600"])
    assert p.returncode == 0 and p.stderr == ""
    assert (tmp_path / "shot.png").is_file()
