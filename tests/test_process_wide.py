"""Importing the engine and running it changes nothing process-wide.

A library in someone else's process must not retune the allocator
(``mallopt``) or switch the garbage collector off: the app and the CLI choose
the allocator setting at their own start-up, and the app collects cycles on
its GUI thread itself (pyqtgraph's collector, app/launch.py). Each case runs
in a fresh interpreter, since both are process-wide.
"""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

# ctypes resolves a C function on a loaded library through CDLL.__getattr__ (or
# __getitem__) the first time it is named: the spy sees every lookup of mallopt,
# whichever way the library is opened.
_PROBE = """
import ctypes, gc, queue
looked_up = []
_attr, _item = ctypes.CDLL.__getattr__, ctypes.CDLL.__getitem__
def _spy_attr(self, name):
    looked_up.append(name)
    return _attr(self, name)
def _spy_item(self, name):
    looked_up.append(name)
    return _item(self, name)
ctypes.CDLL.__getattr__, ctypes.CDLL.__getitem__ = _spy_attr, _spy_item

import torch
from torch import nn
import hookscope.core as hc
from hookscope.core.model.loaded_model import LoadedModel
from hookscope.core.session.runner import FINAL, LocalRunner, RunRequest

during = []

class Probe(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 3)

    def forward(self, x):
        during.append(gc.isenabled())  # inside the forward, on whichever thread runs it
        return self.lin(x)

torch.manual_seed(0)
m = Probe().eval()
x = torch.ones(1, 3)
r = hc.compare(m, x, hc.Plan(capture=["lin"], clamp={"lin": (0.0, 0.0)}))
assert r.outputs_differ  # the clamp ran
answers = queue.Queue()
runner = LocalRunner(answers.put)
runner.submit(RunRequest(LoadedModel(m, x, "probe", "module"), "example", hc.Plan(capture=["lin"])))
while not isinstance(ev := answers.get(timeout=60), FINAL):
    pass
runner.close()
assert type(ev).__name__ == "Finished", ev
{after}
print(gc.isenabled(), all(during), len(during), "mallopt" in looked_up)
"""


def _probe(after: str = "", fast: str = "") -> list[str]:
    env = {**os.environ, "HOOKSCOPE_FAST": fast}
    out = subprocess.run([sys.executable, "-c", _PROBE.replace("{after}", after)],
                         capture_output=True, text=True, timeout=120, env=env)
    assert out.returncode == 0, out.stderr
    return out.stdout.split()


@pytest.mark.parametrize("fast", ["", "0"], ids=["speed-ups on", "reference path"])
def test_import_and_runs_leave_gc_on_and_the_allocator_alone(fast):
    gc_on, gc_on_during, forwards, mallopt = _probe(fast=fast)
    assert gc_on == "True"
    assert gc_on_during == "True" and int(forwards) >= 3  # baseline, intervened, the runner's
    assert mallopt == "False"


def test_the_probe_sees_mallopt_when_the_startup_default_is_applied():
    # The check above can fail: the app's start-up call is seen by the same spy.
    *_, mallopt = _probe("from hookscope.core.fast import apply_default; apply_default()")
    assert mallopt == ("True" if sys.platform.startswith("linux") else "False")


def test_the_probe_sees_gc_switched_off_in_a_forward():
    # ... and so can the gc check: a forward that switches it off is reported.
    gc_on, *_ = _probe("gc.disable()")
    assert gc_on == "False"


CORE = Path(__file__).resolve().parents[1] / "core"


def test_no_code_in_core_switches_the_collector_or_the_allocator():
    # The probes above run one model; this reads every file of the engine: no collector
    # switch anywhere, and mallopt only in the setting the app and CLI apply explicitly.
    found = []
    for path in CORE.rglob("*.py"):
        text = path.read_text()
        if re.search(r"\bgc\.(disable|freeze|set_threshold)\(", text):
            found.append(f"{path.relative_to(CORE)}: gc switch")
        if "mallopt" in text and path.relative_to(CORE).as_posix() != "fast/memory.py":
            found.append(f"{path.relative_to(CORE)}: mallopt")
    assert found == []
