"""The core runner on its own (no Qt): newest wins, stale answers dropped, a run stops at
its next layer, whatever a model throws is a message, progress is counted."""

from __future__ import annotations


from concurrent.futures import CancelledError as FutureCancelled

import pytest
import torch
from torch import nn

from hookscope.core import ForwardError, Plan, SpecError, compare, load_model
from hookscope.core.session.runner import (Cancelled, Failed, Finished, Loaded, LoadRequest,
                                           LocalRunner, Observed, Progress, RunRequest, Started)
from hookscope.core.model.loaded_model import LoadedModel

from runner_doubles import Recorder, gated_model, half_gated_model


@pytest.fixture
def runner():
    rec = Recorder()
    r = LocalRunner(rec, progress_every_s=0)
    r.rec = rec
    yield r
    r.close()


def hooks_left(m: nn.Module) -> int:
    # Gated registers one forward hook of its own on each leaf: those stay.
    return sum(len(x._forward_pre_hooks) for x in m.modules())


def test_newest_request_wins_and_stale_answers_are_dropped(runner):
    lm = gated_model()
    m = lm.module
    m.release.clear()
    first = runner.submit(RunRequest(lm, "[[1.0, 2.0, 3.0]]", Plan()))
    assert m.entered.wait(30)  # in flight, held before its first layer
    futures = [runner.submit(RunRequest(lm, f"[[{i}.0, 2.0, 3.0]]", Plan())) for i in range(50)]
    m.release.set()
    a, b = runner.rec.next_final(), runner.rec.next_final()
    assert isinstance(a, Cancelled) and a.request_id == first.request_id  # stopped at its next layer
    assert isinstance(b, Finished) and b.request_id == futures[-1].request_id  # only the newest ran
    answered = {ev.request_id for ev in runner.rec.events}
    assert answered == {first.request_id, futures[-1].request_id}  # the replaced ones: nothing
    assert runner.counts.dropped == 50 and runner.counts.runs_done == 1
    # Their futures: the newest has the answer, every other one is cancelled.
    assert futures[-1].result(30) is b
    assert first.cancelled() and all(f.cancelled() for f in futures[:-1])
    assert [f.request_id for f in futures] == sorted({f.request_id for f in futures})
    with torch.no_grad():
        expected = m.out(m.lin(torch.tensor([[49.0, 2.0, 3.0]])))
    assert torch.equal(b.result.output_with, expected)


def test_cancel_stops_the_run_at_its_next_layer(runner):
    lm = gated_model()
    m = lm.module
    m.release.clear()
    fut = runner.submit(RunRequest(lm, "example", Plan(capture=("lin",))))
    assert m.entered.wait(30)
    assert runner.cancel()
    m.release.set()
    ev = runner.rec.next_final()
    assert isinstance(ev, Cancelled) and ev.request_id == fut.request_id
    with pytest.raises(FutureCancelled):
        fut.result(30)
    assert m.ran == {"lin": 0, "out": 0}  # not one layer ran after the cancel
    assert hooks_left(m) == 0
    nxt = runner.submit(RunRequest(lm, "example", Plan()))
    ev = runner.rec.next_final()
    assert isinstance(ev, Finished) and ev.request_id == nxt.request_id


def test_close_during_a_held_observe_pass_returns_and_stops_it_at_its_next_layer():
    rec = Recorder()
    r = LocalRunner(rec)
    lm = gated_model()
    m = lm.module
    m.release.clear()
    r.submit(RunRequest(lm, "example", Plan(capture=("lin",)), observe_tree=True))
    assert m.entered.wait(30)             # the first pass of a new model: observe
    assert r.close(timeout_s=0) is False  # returns at once; the forward is still held
    n_events = len(rec.events)
    m.release.set()
    r._thread.join(30)
    assert not r.is_alive
    assert m.ran == {"lin": 0, "out": 0}  # the observe pass stopped at its next layer
    assert hooks_left(m) == 0
    assert [len(x._forward_hooks) for x in (m.lin, m.out)] == [1, 1]  # only the test's own
    assert len(rec.events) == n_events    # nothing answered after close
    assert r.submit(RunRequest(lm, "example", Plan())) and r.counts.runs_done == 0


class Boom(BaseException):
    pass


@pytest.mark.parametrize("exc", [KeyboardInterrupt("ctrl-c"), SystemExit(3), Boom("custom")])
def test_whatever_a_model_throws_is_a_message_and_the_runner_goes_on(runner, exc):
    class Thrower(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(3, 2)

        def forward(self, x):
            self.lin(x)
            raise exc

    bad = LoadedModel(Thrower(), torch.ones(1, 3), "test:thrower", "factory")
    runner.submit(RunRequest(bad, "example", Plan(capture=("lin",), clamp={"lin": (0, 1)})))
    ev = runner.rec.next_final()
    assert isinstance(ev, Failed) and type(exc).__name__ in ev.message
    assert ev.error is exc
    assert not bad.module.lin._forward_hooks and not bad.module.lin._forward_pre_hooks
    good = load_model("demo:clamp")
    runner.submit(RunRequest(good, "example", Plan()))
    ev = runner.rec.next_final()
    assert isinstance(ev, Finished)
    assert runner.counts.runs_failed == 1 and runner.is_alive


def test_user_and_internal_errors_come_back_as_messages(runner):
    lm = load_model("demo:clamp")
    runner.submit(RunRequest(lm, "[[1.0, 2.0", Plan()))
    ev = runner.rec.next_final()
    assert isinstance(ev, Failed) and ev.message and not ev.message.startswith("internal error")

    class BadPlan(Plan):
        def resolve(self, module, tree=None):
            raise ZeroDivisionError("boom")

    runner.submit(RunRequest(lm, "example", BadPlan()))
    ev = runner.rec.next_final()
    assert ev.message.startswith("internal error: ZeroDivisionError")


def test_progress_counts_layer_calls_up_to_the_total(runner):
    lm = load_model("demo:cnn")
    leaves = sum(1 for m in lm.module.modules() if next(m.children(), None) is None)
    rid = runner.submit(RunRequest(lm, "example", Plan(capture=("conv1",)),
                                   observe_tree=True)).request_id
    assert isinstance(runner.rec.next_final(), Finished)
    kinds = [type(ev) for ev in runner.rec.events if ev.request_id == rid]
    assert kinds[0] is Started and Observed in kinds and kinds[-1] is Finished
    prog = [ev for ev in runner.rec.events if isinstance(ev, Progress)]
    done = [p.done for p in prog]
    assert done == sorted(done) and len(set(done)) == len(done)
    assert all(p.done <= p.total for p in prog) and prog[-1].elapsed_s >= prog[0].elapsed_s
    calls_per_pass = prog[-1].total // 3  # observe, baseline, intervened
    assert prog[-1].done == prog[-1].total == 3 * calls_per_pass and calls_per_pass >= leaves - 1
    # the next run of the same input reuses the baseline: one forward to count
    runner.submit(RunRequest(lm, "example", Plan(capture=("conv1",), clamp={"conv1": (0, 1)})))
    ev = runner.rec.next_final()
    assert ev.result.baseline_reused
    last = [p for p in runner.rec.events if isinstance(p, Progress)][-1]
    assert last.done == last.total == calls_per_pass


def test_baseline_is_reused_only_for_the_same_input_values(runner, tmp_path):
    import numpy as np

    lm = load_model("demo:clamp")
    f = tmp_path / "x.npy"
    plan = Plan(clamp={"0": (-0.5, 0.5)})
    got = []
    for values in ([[1.0, 2.0, 3.0]], [[1.0, 2.0, 3.0]], [[-4.0, 5.0, 9.0]]):
        np.save(f, np.array(values, dtype=np.float32))  # the same input text each time
        runner.submit(RunRequest(lm, str(f), plan))
        got.append(runner.rec.next_final().result)
    assert [r.baseline_reused for r in got] == [False, True, False]
    ref = compare(load_model("demo:clamp").module, torch.tensor([[-4.0, 5.0, 9.0]]), plan)
    assert torch.equal(got[2].output_without, ref.output_without)
    assert torch.equal(got[2].output_with, ref.output_with)


def test_loads_are_requests_too(runner):
    fut = runner.submit(LoadRequest("demo:cnn"))
    ev = runner.rec.next_final()
    assert isinstance(ev, Loaded) and ev.request_id == fut.request_id and fut.result(30) is ev
    assert ev.tree.find("conv1").type_name == "Conv2d"
    bad = runner.submit(LoadRequest("demo:nope"))
    ev = runner.rec.next_final()
    assert isinstance(ev, Failed) and "unknown demo" in ev.message
    with pytest.raises(SpecError, match="unknown demo"):  # the load's own error, as raised
        bad.result(30)
    assert runner.counts.loads_done == 1


def test_the_rule_finishes_a_half_done_run_or_one_that_the_plots_waited_for():
    from hookscope.core.session.runner import finish_in_flight

    assert finish_in_flight(done=5, total=10, since_last_result_s=0.0)       # half done
    assert not finish_in_flight(done=1, total=10, since_last_result_s=0.01)  # just begun: restart
    assert finish_in_flight(done=1, total=10, since_last_result_s=0.5)       # the plots wait


def test_a_half_done_run_finishes_and_the_newest_runs_after_it(runner):
    lm = half_gated_model()
    m = lm.module
    runner.submit(RunRequest(lm, "example", Plan()))
    assert isinstance(runner.rec.next_final(), Finished)  # the runner now knows a run's time
    m.release.clear()
    m.at_gate.clear()
    held = runner.submit(RunRequest(lm, "example", Plan(clamp={"lin": (-0.1, 0.1)})))
    assert m.at_gate.wait(30)  # its baseline is reused: one forward, held after its first layer
    newest = runner.submit(RunRequest(lm, "example", Plan(clamp={"lin": (-0.2, 0.2)})))
    m.release.set()
    a, b = runner.rec.next_final(), runner.rec.next_final()
    assert isinstance(a, Finished) and a.request_id == held.request_id   # finished, not cancelled
    assert isinstance(b, Finished) and b.request_id == newest.request_id  # and the newest after it
    assert held.result(30) is a and newest.result(30) is b
    want = compare(m, lm.example_input, Plan(clamp={"lin": (-0.2, 0.2)}))
    assert torch.equal(b.result.output_with, want.output_with)


def test_a_failed_run_raises_from_its_future_what_a_person_reads(runner):
    class Broken(nn.Module):
        def forward(self, x):
            raise ValueError("the model's own bug")

    fut = runner.submit(RunRequest(LoadedModel(Broken(), torch.zeros(1), "t", "module"), "example",
                                   Plan()))
    with pytest.raises(ForwardError) as info:
        fut.result(30)
    assert str(info.value) == runner.rec.next_final().message
    assert isinstance(info.value.__cause__, ValueError)  # the model's exception, chained


def test_cancelling_a_future_drops_its_waiting_request_or_stops_it_in_flight(runner):
    lm = gated_model()
    m = lm.module
    m.release.clear()
    flying = runner.submit(RunRequest(lm, "example", Plan(capture=("lin",))))
    assert m.entered.wait(30)
    load = runner.submit(LoadRequest("demo:clamp"))  # waits: a load stops the run in flight...
    assert load.cancel()                             # ...but this one is dropped before it starts
    assert flying.cancel()                           # and this one stops at its next layer
    m.release.set()
    ev = runner.rec.next_final()
    assert isinstance(ev, Cancelled) and ev.request_id == flying.request_id
    assert m.ran == {"lin": 0, "out": 0}
    after = runner.submit(RunRequest(lm, "example", Plan()))
    assert isinstance(after.result(30), Finished)
    assert not any(e.request_id == load.request_id for e in runner.rec.events)  # never ran
    assert runner.counts.loads_done == 0


def test_a_closed_runner_cancels_what_waits_and_what_is_submitted_after():
    rec = Recorder()
    r = LocalRunner(rec)
    lm = gated_model()
    m = lm.module
    m.release.clear()
    flying = r.submit(RunRequest(lm, "example", Plan()))
    assert m.entered.wait(30)
    waiting = r.submit(RunRequest(lm, "example", Plan(capture=("lin",))))
    assert r.close(timeout_s=0) is False  # the forward in flight is still held
    late = r.submit(RunRequest(lm, "example", Plan()))
    assert waiting.cancelled() and late.cancelled()
    m.release.set()  # the run in flight stops at its next layer
    r._thread.join(30)
    assert flying.cancelled()
