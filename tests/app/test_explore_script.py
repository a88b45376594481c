"""explore() from a plain script (no IPython): it shows the window and returns only when the
window is closed, with the session the window edited."""

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
