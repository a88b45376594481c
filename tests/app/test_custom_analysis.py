"""An analysis defined here, registered once, runs through Session.analyse, Live mode, the CLI
(found in a user module given with --use) and a Ray actor.

This is the proof that adding an analysis touches only a request class, its result class
and one registry entry. (No Qt in this file: the Ray worker imports it to read the request.)
"""

import json
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import pytest
import torch

from hookscope.app.cli import main
from hookscope.core import (Analysis, PlanError, Scale, Session, compare, get_analysis, load_model,
                            register_analysis, registered_analyses)
from hookscope.core.analyses import unregister_analysis


@dataclass(frozen=True)
class OutputNorms:
    """The ``p``-norm of each output row, without and with the plan."""

    without: list[float]
    with_plan: list[float]

    def to_json_dict(self) -> dict:
        return {"without": self.without, "with": self.with_plan}


@dataclass(frozen=True)
class OutputNorm:
    """The analysis: compares the model without and with the plan, then measures the outputs."""

    p: float = 2.0
    name: ClassVar[str] = "output-norm"

    def compute(self, module, inputs, plan, device, meaning, should_stop=None) -> OutputNorms:
        r = compare(module, inputs, plan, device, should_stop=should_stop)
        return OutputNorms(self._norms(r.output_without), self._norms(r.output_with))

    def _norms(self, t: torch.Tensor) -> list[float]:
        return torch.linalg.vector_norm(t.flatten(1).double(), ord=self.p, dim=1).tolist()


@dataclass(frozen=True)
class HeldNorm(OutputNorm):
    """The same analysis holding something that cannot leave this process (a lock)."""

    held: Any = field(default_factory=threading.Lock)


def by_hand(factor: float, p: float) -> list[float]:
    """The same norms with a hand-written hook scaling fc1's output."""
    lm = load_model("demo:features")
    h = lm.module.fc1.register_forward_hook(lambda m, i, o: o * factor)
    try:
        with torch.inference_mode():
            out = lm.module(lm.example_input)
    finally:
        h.remove()
    return torch.linalg.vector_norm(out.flatten(1).double(), ord=p, dim=1).tolist()


@pytest.fixture
def output_norm():
    register_analysis(OutputNorm)
    yield OutputNorm
    unregister_analysis("output-norm")
    assert "output-norm" not in registered_analyses()


def test_custom_analysis_through_the_session_and_live_mode(output_norm):
    assert get_analysis("output-norm") is OutputNorm
    assert isinstance(OutputNorm(), Analysis)
    s = Session.load("demo:features")
    try:
        s.intervene("fc1", Scale(0.5))
        got = s.analyse(OutputNorm(p=1.0))
        assert isinstance(got, OutputNorms)
        torch.testing.assert_close(got.with_plan, by_hand(0.5, 1.0))
        torch.testing.assert_close(got.without, by_hand(1.0, 1.0))
        assert got.with_plan != got.without

        # Live: every edit re-runs, and the analysis set on the session runs with each run.
        s.set_options(live=True)
        s.set_derived("output-norm", OutputNorm(p=3.0))
        s.intervene("fc1", Scale(0.25))
        deadline = time.monotonic() + 60
        while not (s.last_result is not None and not s.busy
                   and s.last_result.plan.interventions.get("fc1") == Scale(0.25)
                   and "output-norm" in s.last_result.extras):
            assert time.monotonic() < deadline, "Live mode did not re-run with the analysis"
            time.sleep(0.02)
        live = s.last_result.extras["output-norm"]
        torch.testing.assert_close(live.with_plan, by_hand(0.25, 3.0))
    finally:
        assert s.close()


def test_custom_analysis_through_the_cli_from_a_user_module(tmp_path, monkeypatch, capsys):
    (tmp_path / "my_analyses.py").write_text(
        "from hookscope.core import register_analysis\n"
        f"from {__name__} import OutputNorm\n\n"
        "register_analysis(OutputNorm)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        code = main(["analyse", "output-norm", "demo:features", "--use", "my_analyses",
                     "--intervene", "fc1=scale:0.5", "--param", "p=1"])
        out, err = capsys.readouterr()
        assert code == 0, err
        data = json.loads(out)
        torch.testing.assert_close(data["with"], by_hand(0.5, 1.0))
        torch.testing.assert_close(data["without"], by_hand(1.0, 1.0))

        code = main(["analyse", "output-norm", "demo:features", "--param", "p=lots"])
        _, err = capsys.readouterr()
        assert code == 2 and err.count("\n") == 1 and "p must be float, got 'lots'" in err
        code = main(["analyse", "output-norm", "demo:features", "--param", "q=1"])
        _, err = capsys.readouterr()
        assert code == 2 and "its parameters are p" in err
    finally:
        unregister_analysis("output-norm")
        sys.modules.pop("my_analyses", None)
    code = main(["analyse", "output-norm", "demo:features"])
    assert code == 2 and "unknown analysis 'output-norm'" in capsys.readouterr().err


@pytest.mark.ray
def test_custom_analysis_in_a_ray_actor(output_norm):
    pytest.importorskip("ray", reason="ray is not installed (pip install 'hookscope[ray]')")
    from hookscope.core.remote import make_runner
    from hookscope.core.remote.remote_ray import connect

    # The actor imports this file to read the request: its folder travels as the job's.
    ray = connect("local", working_dir=Path(__file__).parent, num_cpus=1)
    try:
        s = Session(runner_factory=make_runner("local"))
        try:
            s.open_model("demo:features", run_after=False).result(timeout=180)
            s.intervene("fc1", Scale(0.5))
            got = s.analyse(OutputNorm(p=1.0), timeout_s=180)
            # One that cannot be sent is refused in words; the comparison still ran.
            with pytest.raises(PlanError, match="output-norm cannot be sent to the Ray actor"):
                s.analyse(HeldNorm(p=1.0), timeout_s=180)
            assert s.last_result.output_with is not None
        finally:
            s.close()
    finally:
        ray.shutdown()
    assert isinstance(got, OutputNorms)
    # The actor runs torch on one thread, this process on more: float32 sums in another order.
    torch.testing.assert_close(got.with_plan, by_hand(0.5, 1.0), rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(got.without, by_hand(1.0, 1.0), rtol=1e-5, atol=1e-6)
