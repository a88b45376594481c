"""explore() from a plain script (no IPython): it shows the window and returns only when the
window is closed, with the session the window edited; at Python's own prompt (python -i) it
returns at once and the window runs beside the prompt."""

from __future__ import annotations

import os
import subprocess
import sys

SCRIPT = r"""
import torch
from torch import nn
from PySide6.QtCore import QTimer
from hookscope.app.notebook import _OPEN, explore
from hookscope.core import Clamp

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
x = torch.tensor([[1.0, 2.0, 3.0]])
seen = []

def drive():
    win = _OPEN[-1]
    seen.append(win.isVisible())
    def on_result(result):
        if not seen[1:]:  # the first result: edit in the window, run again
            seen.append("first")
            win.session.intervene("0", Clamp(-0.25, 0.25))
            win.request_run()
        else:
            seen.append("second")
            win.close()
    win.resultShown.connect(on_result)

QTimer.singleShot(0, drive)  # runs once explore() has shown the window and waits in its loop
s = explore(model, x)
print("returned", seen, s.plan.clamp, s.last_result.plan.clamp, s.model.module is model)
"""


def test_explore_blocks_until_the_window_is_closed(tmp_path):
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen", XDG_CONFIG_HOME=str(tmp_path))
    done = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, f"exit {done.returncode}\n{done.stdout}\n{done.stderr}"
    assert done.stdout.strip() == ("returned [True, 'first', 'second'] {'0': (-0.25, 0.25)} "
                                   "{'0': (-0.25, 0.25)} True")


def test_at_pythons_own_prompt_explore_returns_and_the_window_runs_beside_it(tmp_path):
    """``python -i``: explore() returns at once (the prompt stays usable) and the window
    keeps working while the prompt waits for a line; it runs the model and shows results."""
    script = tmp_path / "start.py"
    script.write_text(
        "import torch\nfrom torch import nn\nfrom hookscope.app.notebook import _OPEN, explore\n"
        "torch.manual_seed(0)\n"
        "model = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))\n"
        "s = explore(model, torch.tensor([[1.0, 2.0, 3.0]]))\n"
        "print('returned', _OPEN[-1].isVisible())\n")
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen", XDG_CONFIG_HOME=str(tmp_path))
    proc = subprocess.Popen([sys.executable, "-u", "-i", str(script)], env=env, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    import time

    try:
        assert proc.stdout.readline().strip() == "returned True"
        # Between the lines it is sent the prompt only waits: the window loads the model
        # and runs it meanwhile (Qt's loop turns in the prompt's input hook).
        for _ in range(120):
            time.sleep(0.5)
            proc.stdin.write("print('result', s.last_result is not None)\n")
            proc.stdin.flush()
            if proc.stdout.readline().strip() == "result True":
                break
        else:
            raise AssertionError("the window never ran while the prompt waited")
        proc.stdin.write("print('same', _OPEN[-1].last_result is s.last_result)\n"
                         "_ = _OPEN[-1].close()\n")
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, f"exit {proc.returncode}\n{out}\n{err}"
    assert out.strip() == "same True", out + err
