"""Importing the engine and running it changes nothing process-wide.

A library in someone else's process must not retune the allocator
(``mallopt``) or switch the garbage collector off: the app and the CLI choose
the allocator setting at their own start-up, and the app collects cycles on
its GUI thread itself (pyqtgraph's collector, app/launch.py). Each case runs
in a fresh interpreter, since both are process-wide.
"""

import subprocess
import sys

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


def _probe(after: str = "") -> list[str]:
    out = subprocess.run([sys.executable, "-c", _PROBE.replace("{after}", after)],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout.split()


def test_import_and_runs_leave_gc_on_and_the_allocator_alone():
    gc_on, gc_on_during, forwards, mallopt = _probe()
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
