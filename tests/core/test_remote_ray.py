"""The Ray runner against the local runner: same answers, from a model that lives in an actor.

A local Ray instance is started once for this file (``ray.init(num_cpus=1)``)
and shut down after it. Every test drives :class:`RayRunner` and, where the
answer is compared, :class:`LocalRunner` with the same requests.
"""

from __future__ import annotations

import pickle
import socket
import subprocess
import sys
import textwrap

import pytest
import torch

from hookscope.core import Plan
from hookscope.core.model import CodeTrust, CodeTrustError
from hookscope.core.model.code_trust import code_to_run
from hookscope.core.session.runner import (Cancelled, Failed, Finished, Loaded, LoadRequest,
                                           LocalRunner, Observed, RunRequest)

ray = pytest.importorskip("ray", reason="ray is not installed (pip install 'hookscope[ray]')")
pytestmark = pytest.mark.ray

from hookscope.core.remote.remote_ray import RayRunner, RemoteModel, connect  # noqa: E402
from runner_doubles import Recorder  # noqa: E402

FACTORIES = '''
import torch
from torch import nn

from helper import width  # a second file of the folder: the whole folder travels


class GateLayer(nn.Module):
    """Waits at the test's gate actor, when there is one, and lets the test know it arrived."""

    def forward(self, x):
        import ray
        try:
            gate = ray.get_actor("hookscope-test-gate")
        except ValueError:
            return x
        ray.get(gate.arrive_and_wait.remote())
        return x


class After(nn.Module):
    def forward(self, x):
        import ray
        try:
            ray.get(ray.get_actor("hookscope-test-gate").after.remote())
        except ValueError:
            pass
        return x * 2


def small():
    torch.manual_seed(3)
    return nn.Sequential(nn.Linear(4, width()), nn.ReLU(), nn.Linear(width(), 2)), torch.ones(1, 4)


def gated():
    torch.manual_seed(3)
    return nn.Sequential(nn.Linear(4, 4), GateLayer(), After(), nn.Linear(4, 2)), torch.ones(1, 4)


class Recurrent(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = nn.LSTM(4, 3, batch_first=True)

    def forward(self, x):
        out, (h, c) = self.rnn(x)
        return out.sum(1) + h[-1] * c[-1]


def nested():  # a layer with a nested output: (out, (h, c))
    torch.manual_seed(3)
    return Recurrent(), torch.randn(1, 5, 4)
'''


@pytest.fixture(scope="module")
def ray_local(folder):
    """A local Ray instance whose job ships ``folder`` (its working_dir), as on a cluster."""
    connect("local", working_dir=folder, num_cpus=1, include_dashboard=False)
    yield ray
    ray.shutdown()


@pytest.fixture(scope="module")
def remote(ray_local):
    rec = Recorder(timeout_s=90)
    runner = RayRunner(rec, "local", progress_every_s=0.02, byte_budget=1 << 20)
    yield runner, rec
    runner.close()


@pytest.fixture(scope="module")
def local():
    rec = Recorder(timeout_s=90)
    runner = LocalRunner(rec, progress_every_s=0.02)
    yield runner, rec
    runner.close()


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    d = tmp_path_factory.mktemp("factories")
    (d / "factories.py").write_text(FACTORIES)
    (d / "helper.py").write_text("def width():\n    return 5\n")
    sys.path.insert(0, str(d))  # the local runner imports the same helper
    torch.manual_seed(11)
    state = {"0.weight": torch.randn(5, 4), "0.bias": torch.randn(5),
             "2.weight": torch.randn(2, 5), "2.bias": torch.randn(2)}
    torch.save(state, d / "w.pt")
    yield d
    sys.path.remove(str(d))


def load_both(remote, local, spec, weights=None):
    r = remote[1].ask(remote[0], LoadRequest(spec, weights))
    lo = local[1].ask(local[0], LoadRequest(spec, weights))
    assert isinstance(r, Loaded) and isinstance(lo, Loaded), (r, lo)
    return r, lo


def run_both(remote, local, r, lo, plan, text="example", observe=False):
    got = remote[1].ask(remote[0], RunRequest(r.model, text, plan, observe_tree=observe))
    ref = local[1].ask(local[0], RunRequest(lo.model, text, plan, observe_tree=observe))
    return got, ref


def assert_same(got, ref):
    assert isinstance(got, Finished) and isinstance(ref, Finished), (got, ref)
    a, b = got.result, ref.result
    assert torch.equal(a.output_without, b.output_without)
    assert torch.equal(a.output_with, b.output_with)
    assert a.outputs_differ == b.outputs_differ and a.max_abs_diff == b.max_abs_diff
    assert list(a.captures) == list(b.captures)
    for path in b.captures:
        for xr, yr in zip(a.captures[path], b.captures[path], strict=True):
            assert [r.leaf for r in xr.leaves] == [r.leaf for r in yr.leaves]
            for x, y in zip(xr.leaves, yr.leaves):  # every tensor leaf of a nested output
                assert x.stats.to_dict(with_histogram=True) == y.stats.to_dict(with_histogram=True)
                for s, t in ((x.tensor, y.tensor), (x.pre_tensor, y.pre_tensor)):
                    assert (s is None) == (t is None) and (s is None or torch.equal(s, t))


def test_demo_model_answers_as_the_local_runner(remote, local):
    r, lo = load_both(remote, local, "demo:features")
    assert isinstance(r.model.module, RemoteModel)
    assert r.tree.to_dict() == lo.tree.to_dict()
    assert torch.equal(r.model.example_input, lo.model.example_input)
    plan = Plan(capture=("fc1", "fc2", "fc3"), clamp={"fc2": (-0.1, 0.1)})
    got, ref = run_both(remote, local, r, lo, plan, observe=True)
    assert_same(got, ref)
    observed = [e for e in remote[1].events if isinstance(e, Observed) and e.request_id == got.request_id]
    assert [o.tree.to_dict() for o in observed] == [
        e.tree.to_dict() for e in local[1].events if isinstance(e, Observed) and e.request_id == ref.request_id]
    assert got.result.transfer.withheld == ()


def test_factory_file_travels_with_its_folder(remote, local, folder):
    spec = f"{folder / 'factories.py'}:small"
    r, lo = load_both(remote, local, spec, str(folder / "w.pt"))
    # The actor ran the factory from Ray's copy of the folder, not from this one.
    assert ray.get(remote[0].actor.ping.remote())["cwd"] != str(folder)
    plan = Plan(capture=("0", "2"), clamp={"0": (-0.3, 0.3)})
    got, ref = run_both(remote, local, r, lo, plan, text="[[1.0, -2.0, 0.5, 3.0]]")
    assert_same(got, ref)


def test_every_leaf_of_a_nested_output_comes_back(remote, local, folder):
    r, lo = load_both(remote, local, f"{folder / 'factories.py'}:nested")
    got, ref = run_both(remote, local, r, lo, Plan(capture=("rnn",), clamp={"rnn": (-0.1, 0.1)}))
    assert_same(got, ref)
    assert [q.leaf for q in got.result.captures["rnn"][0].leaves] == ["[0]", "[1][0]", "[1][1]"]


def assert_close(got, ref):
    """Like :func:`assert_same`, to float32 rounding: the actor runs torch on one thread
    (num_cpus=1), this process on more, and a matmul's sums then run in another order."""
    assert isinstance(got, Finished) and isinstance(ref, Finished), (got, ref)
    a, b = got.result, ref.result
    torch.testing.assert_close(a.output_without, b.output_without)
    torch.testing.assert_close(a.output_with, b.output_with)
    assert a.outputs_differ == b.outputs_differ and list(a.captures) == list(b.captures)
    for path in b.captures:
        for xr, yr in zip(a.captures[path], b.captures[path], strict=True):
            assert [r.leaf for r in xr.leaves] == [r.leaf for r in yr.leaves]
            for x, y in zip(xr.leaves, yr.leaves):
                for f in ("min", "max", "mean", "std"):
                    assert getattr(x.stats, f) == pytest.approx(getattr(y.stats, f), rel=1e-5, abs=1e-6)
                torch.testing.assert_close(x.tensor, y.tensor)
                torch.testing.assert_close(x.pre_tensor, y.pre_tensor)


def test_text_prompts_are_tokenized_by_the_actor(remote, local):
    r, lo = load_both(remote, local, "demo:lm")
    # The client has the token strings, not the tokenizer.
    assert r.model.meaning.kind == lo.model.meaning.kind
    assert type(r.model.meaning.codec).__name__ == "TokenTable"
    vocab = list(range(lo.model.meaning.codec.vocab_size))
    assert r.model.meaning.codec.token_strings(vocab) == lo.model.meaning.codec.token_strings(vocab)
    plan = Plan(capture=("blocks.0.attn", "head"), clamp={"blocks.0.attn": (-0.2, 0.2)})
    prompt = "text:the cat sat on the "
    got, ref = run_both(remote, local, r, lo, plan, text=prompt)
    assert_close(got, ref)
    ids = torch.tensor([lo.model.meaning.codec.encode(prompt.removeprefix("text:"))])
    assert torch.equal(got.result.inputs, ids)
    again = remote[1].ask(remote[0], RunRequest(r.model, prompt, plan))  # sent once
    assert again.result.transfer.sent == len(pickle.dumps(plan))
    assert torch.equal(again.result.inputs, ids)
    bad = run_both(remote, local, r, lo, plan, text="text:")  # the local runner's message
    assert isinstance(bad[0], Failed) and bad[0].message == bad[1].message
    assert_close(*run_both(remote, local, r, lo, plan, text="text:the dog"))


def test_a_steering_vector_from_two_prompts_is_built_in_the_actor(remote, local):
    from hookscope.core import Add, Clamp, SteeringVector

    r, lo = load_both(remote, local, "demo:lm")
    plan = Plan(interventions={"blocks.0": Add("diff:text:the cat sat|text:the dog sat", 3.0),
                               "blocks.0.attn.probs": Clamp(-5, 5)})
    got, ref = run_both(remote, local, r, lo, plan, text="text:the cat sat on the ")
    # Two processes with two thread counts (the actor has one CPU): the matmuls' sums run
    # in another order, so the vector, outputs and receipts agree to float32 rounding.
    assert_close(got, ref)
    a, b = got.result, ref.result
    va, vb = (x.plan.intervention_for("blocks.0").vector for x in (a, b))
    assert isinstance(va, SteeringVector)
    torch.testing.assert_close(va.values, vb.values)
    assert list(a.receipts) == list(b.receipts)
    for path, ra in a.receipts.items():
        rb = b.receipts[path]
        for f in ("path", "intervention", "fired_calls", "elements", "output_changed", "alarm"):
            assert getattr(ra, f) == getattr(rb, f), (path, f)
        for f in ("changed", "changed_fraction", "relative_change", "output_max_abs_diff",
                  "output_relative_change"):
            assert getattr(ra, f) == pytest.approx(getattr(rb, f), rel=1e-4, abs=1e-6), (path, f)
    assert a.receipts["blocks.0.attn.probs"].alarm is not None


def test_errors_are_the_local_runners_messages(remote, local):
    r, lo = load_both(remote, local, "demo:clamp")
    bad_layer = run_both(remote, local, r, lo, Plan(capture=("nope",)))
    bad_input = run_both(remote, local, r, lo, Plan(), text="[[1.0, 2.0]]")
    for got, ref in (bad_layer, bad_input):
        assert isinstance(got, Failed) and isinstance(ref, Failed)
        assert got.message == ref.message
    bad_spec = remote[1].ask(remote[0], LoadRequest("demo:nope"))
    assert bad_spec.message == local[1].ask(local[0], LoadRequest("demo:nope")).message
    # Still usable: the model loaded before the failed load is still there.
    assert_same(*run_both(remote, local, r, lo, Plan(capture=("0",))))


EVIL = """\
import pathlib
pathlib.Path({marker!r}).write_text("ran")
from torch import nn


def build():
    return nn.Linear(2, 2)
"""


def test_a_spec_read_from_a_file_is_checked_here_before_the_actor_gets_it(remote, tmp_path):
    # The person's yes is checked in this runner's thread, on their machine: a session
    # file's factory without it is refused before anything is sent to the actor.
    marker = tmp_path / "RAN"
    (tmp_path / "evil.py").write_text(EVIL.format(marker=str(marker)))
    spec = f"{tmp_path / 'evil.py'}:build"
    refused = remote[1].ask(remote[0], LoadRequest(spec, trust=CodeTrust.from_data()))
    assert isinstance(refused, Failed) and isinstance(refused.error, CodeTrustError), refused
    assert refused.error.code == code_to_run(spec) and not marker.exists()
    yes = CodeTrust.from_data().granting(code_to_run(spec))
    assert isinstance(remote[1].ask(remote[0], LoadRequest(spec, trust=yes)), Loaded)


def test_tensors_only_within_budget_and_input_sent_once(remote, local):
    runner, rec = remote
    r, lo = load_both(remote, local, "demo:features")
    plan = Plan(capture=("fc1", "fc2", "fc3"))
    ref = local[1].ask(local[0], RunRequest(lo.model, "example", plan))
    size = {p: ref.result.captures[p][0].nbytes for p in plan.capture}
    assert size["fc2"] > size["fc3"] > 0  # fc2 has 4 outputs, fc3 2
    try:
        runner.byte_budget = size["fc1"] + size["fc3"]  # in plan order: fc1 fits, fc2 not, fc3 does
        first = rec.ask(runner, RunRequest(r.model, "example", plan))
        caps = first.result.captures
        assert caps["fc1"][0].tensor is not None and caps["fc3"][0].tensor is not None
        assert caps["fc2"][0].tensor is None and caps["fc2"][0].stats is not None
        assert first.result.transfer.withheld == ("fc2",)
        assert first.result.transfer.tensor_bytes == caps["fc1"][0].nbytes + caps["fc3"][0].nbytes
        runner.tensor_layers = ["fc2"]
        second = rec.ask(runner, RunRequest(r.model, "example", plan))
        assert [p for p, recs in second.result.captures.items() if recs[0].tensor is not None] == ["fc2"]
        # The same input values again: only the plan crossed.
        assert second.result.transfer.sent == len(pickle.dumps(plan)) < first.result.transfer.sent
    finally:
        runner.byte_budget, runner.tensor_layers = 1 << 20, None
    for path in plan.capture:
        assert second.result.captures[path][0].stats.mean == ref.result.captures[path][0].stats.mean


@ray.remote
class Gate:
    def __init__(self) -> None:
        import asyncio

        self.arrived = asyncio.Event()
        self.released = asyncio.Event()
        self.after_calls = 0
        self.armed = True

    async def arrive_and_wait(self) -> None:
        if not self.armed:
            return
        self.arrived.set()
        await self.released.wait()

    async def disarm(self) -> None:
        self.armed = False
        self.released.set()

    async def wait_arrived(self) -> None:
        await self.arrived.wait()

    async def release(self) -> None:
        self.released.set()

    async def after(self) -> None:
        self.after_calls += 1

    async def count_after(self) -> int:
        return self.after_calls


def test_a_cancelled_run_stops_at_its_next_layer(remote, folder):
    runner, rec = remote
    loaded = rec.ask(runner, LoadRequest(f"{folder / 'factories.py'}:gated"))
    gate = Gate.options(name="hookscope-test-gate").remote()
    try:
        fut = runner.submit(RunRequest(loaded.model, "example", Plan(capture=("3",))))
        rid = fut.request_id
        ray.get(gate.wait_arrived.remote(), timeout=60)  # the forward waits inside layer 1
        assert runner.in_flight == rid
        assert runner.cancel()
        ray.get(gate.release.remote())
        ev = rec.next_final()
        assert isinstance(ev, Cancelled) and ev.request_id == rid
        assert fut.cancelled()  # the Ray runner's futures settle as the local runner's do
        assert ray.get(gate.count_after.remote()) == 0  # layer 2 never ran
    finally:
        # Left in place, open: a killed named actor can still be found for a moment.
        ray.get(gate.disarm.remote())
    done = rec.ask(runner, RunRequest(loaded.model, "example", Plan(capture=("3",))))
    assert isinstance(done, Finished) and done.result.captures["3"][0].stats is not None
    assert ray.get(gate.count_after.remote()) == 2  # the next run ran it: baseline and intervened


def test_a_dead_actor_is_a_clear_error_and_a_reload_recovers(remote, local):
    runner, rec = remote
    r, lo = load_both(remote, local, "demo:clamp")
    ray.kill(runner.actor)
    dead = rec.ask(runner, RunRequest(r.model, "example", Plan()))
    assert isinstance(dead, Failed) and "Ray actor that held the model died" in dead.message
    again = rec.ask(runner, RunRequest(r.model, "example", Plan()))
    assert isinstance(again, Failed) and "open the model again" in again.message
    r2 = rec.ask(runner, LoadRequest("demo:clamp"))
    assert_same(*run_both(remote, local, r2, lo, Plan(capture=("0",), clamp={"0": (-0.5, 0.5)})))


def test_cli_run_on_ray_prints_the_local_numbers(ray_local, capsys):
    import io
    import json

    from hookscope.app.headless import run_command

    argv = ["demo:clamp", "--capture", "0,1", "--clamp", "0=-0.5:0.5", "--json"]
    outs = []
    for extra in ([], ["--ray", "local"]):
        out = io.StringIO()
        assert run_command(argv + extra, out) == 0
        d = json.loads(out.getvalue())
        d.pop("timings_ms")
        outs.append(d)
    assert outs[0] == outs[1]
    assert "ray: moved" in capsys.readouterr().err


def test_cli_text_prompt_on_ray_prints_the_local_tokens(ray_local, capsys):
    import io
    import json

    from hookscope.app.headless import run_command

    argv = ["demo:lm", "--input", "text:the cat sat on the ", "--capture", "blocks.1",
            "--clamp", "blocks.0.mlp=-0.3:0.3", "--json"]
    outs = []
    for extra in ([], ["--ray", "local"]):
        out = io.StringIO()
        assert run_command(argv + extra, out) == 0
        d = json.loads(out.getvalue())
        d.pop("timings_ms")
        outs.append(d)
    # The same output read by meaning: tokens, top next tokens and their labels (the
    # probabilities to float32 rounding: the actor computes on one thread).
    def tokens(d):
        return [(p["input"], [(t["index"], t["label"]) for t in p["top_with"]])
                for p in d["output"]["positions"]]

    assert tokens(outs[0]) == tokens(outs[1])
    assert outs[0]["output"]["changed_positions"] == outs[1]["output"]["changed_positions"]
    assert outs[0]["captures"]["blocks.1"][0]["mean"] == pytest.approx(
        outs[1]["captures"]["blocks.1"][0]["mean"], rel=1e-5, abs=1e-6)
    from hookscope.core.demos.demo_lm import CODEC

    want = CODEC.token_strings(CODEC.encode("the cat sat on the "))  # the prompt's own tokens
    shown = [p["input"] for p in outs[1]["output"]["positions"]]
    assert shown and shown == want[-len(shown):]


def test_an_address_that_does_not_answer_is_one_line(tmp_path):
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    code = textwrap.dedent(f"""
        import sys
        from hookscope.app.cli import main
        sys.exit(main(["run", "demo:clamp", "--ray", "ray://127.0.0.1:{port}"]))
    """)
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert p.returncode == 2
    err = p.stderr.strip().splitlines()
    assert err[-1].startswith("hookscope: error: no Ray client server answers at 127.0.0.1:")


def test_aimed_interventions_and_text_sources_run_in_the_actor(remote, local):
    """A text patch source is tokenized in the actor; At travels pickled; heads, positions."""
    from hookscope.core import At, Patch, Zero

    r, lo = load_both(remote, local, "demo:lm")
    plan = Plan(capture=("blocks.1",), interventions={
        "blocks.1": Patch("text:the dog sat on the ", at=At(positions=[-1])),
        "blocks.0.attn": Zero(at=At(heads=[1], positions="last"))})
    got, ref = run_both(remote, local, r, lo, plan, text="text:the cat sat on the ")
    assert_close(got, ref)
    assert got.result.outputs_differ
    assert got.result.plan == plan
