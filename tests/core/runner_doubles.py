"""What the runner tests share: the gated models of ``tests/app/gated_model.py`` (one
copy for the app and the core tests) and a listener that records the answers."""

from __future__ import annotations

import importlib.util
import queue
from pathlib import Path

import torch

from hookscope.core.session.runner import Cancelled, Failed, Finished, Loaded
from hookscope.core.model.loaded_model import LoadedModel

GATED_FILE = Path(__file__).resolve().parents[1] / "app" / "gated_model.py"
HALF_SPEC = f"{GATED_FILE}:make_half"  # a factory spec: the model held after its first layer

_spec = importlib.util.spec_from_file_location("hookscope_tests_gated_model", GATED_FILE)
assert _spec is not None and _spec.loader is not None
gated = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(gated)


def gated_model() -> LoadedModel:
    """A :class:`Gated` model whose forward waits at a gate before any layer runs, so
    the next stop point is the first layer, ``lin``; ``module.ran`` counts each
    leaf's calls (one forward hook of its own on each leaf)."""
    m = gated.Gated()
    m.ran = {"lin": 0, "out": 0}
    for name in m.ran:
        getattr(m, name).register_forward_hook(
            lambda _m, _i, _o, n=name: m.ran.__setitem__(n, m.ran[n] + 1))
    return LoadedModel(m, torch.tensor([[1.0, 2.0, 3.0]]), "test:gated", "factory")


def half_gated_model() -> LoadedModel:
    """A model a run can be held in half done (its second layer waits at a gate)."""
    module, x = gated.make_half()
    return LoadedModel(module, x, "test:gate2", "factory")


class Recorder:
    """The listener: every event in order, and a queue of final answers to wait on."""

    def __init__(self, timeout_s: float = 30) -> None:
        self.events: list = []
        self.final: queue.Queue = queue.Queue()
        self.timeout_s = timeout_s

    def __call__(self, ev) -> None:
        self.events.append(ev)
        if isinstance(ev, (Finished, Failed, Cancelled, Loaded)):
            self.final.put(ev)

    def next_final(self):
        return self.final.get(timeout=self.timeout_s)

    def ask(self, runner, request):
        """Submit ``request`` and wait for its final answer."""
        future = runner.submit(request)
        ev = self.next_final()
        assert ev.request_id == future.request_id
        return ev
