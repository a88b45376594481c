"""A session's requests are the runner's futures, and its events are typed: a replaced run's
future is cancelled and a caller waiting on it is told so; every change is one frozen
dataclass a subscriber tells apart by type."""

from __future__ import annotations

import dataclasses
import threading
import time

import pytest
import torch

from hookscope.core import Cancelled, Clamp, HookscopeError, Plan, Session, compare
from hookscope.core.model import CodeTrust, CodeTrustError
from hookscope.core.session import (Idle, LoadFailed, PlanChanged, RequestFuture, ResultArrived,
                                    RunStarted, SessionEvent)
from hookscope.core.session.runner import Finished

from runner_doubles import gated


@pytest.fixture
def gated_session():
    model, x = gated.make()
    s = Session.from_module(model, x, timeout_s=60)
    yield s, model
    model.release.set()
    s.close()


def test_a_replaced_run_is_cancelled_and_the_newest_answers_its_future(gated_session):
    s, m = gated_session
    m.release.clear()
    m.entered.clear()
    first = s.submit_run()
    assert isinstance(first, RequestFuture) and first.request_id == s.newest_run
    assert m.entered.wait(30)  # in flight, held before its first layer
    s.intervene("lin", Clamp(-0.1, 0.1))
    second = s.submit_run()  # newest wins: the first stops at its next layer
    assert second is not None and second.request_id > first.request_id
    m.release.set()
    answer = second.result(30)
    assert isinstance(answer, Finished) and answer.request_id == second.request_id
    assert first.cancelled()
    assert s.last_result is answer.result and not s.busy  # applied before the future settled
    want = compare(m, torch.tensor([[1.0, 2.0, 3.0]]), Plan(clamp={"lin": (-0.1, 0.1)}))
    assert torch.equal(answer.result.output_with, want.output_with)


def test_a_caller_waiting_on_a_replaced_run_is_told_it_was_cancelled(gated_session):
    s, m = gated_session
    m.release.clear()
    m.entered.clear()
    raised: list[BaseException] = []

    def wait_for_a_run() -> None:
        try:
            s.run(timeout_s=30)
        except BaseException as exc:  # noqa: BLE001 - the test reads what was raised
            raised.append(exc)

    t = threading.Thread(target=wait_for_a_run)
    t.start()
    assert m.entered.wait(30)
    newest = s.submit_run()  # replaces the run the thread waits for
    m.release.set()
    t.join(30)
    assert len(raised) == 1 and isinstance(raised[0], Cancelled)
    assert "newer request" in str(raised[0])
    assert newest is not None
    answer = newest.result(30)
    assert s.last_result is answer.result


def test_a_run_that_does_not_answer_in_time_says_so_and_goes_on(gated_session):
    s, m = gated_session
    m.release.clear()
    with pytest.raises(Exception, match="no answer within 0.05 s"):
        s.run(timeout_s=0.05)
    assert s.busy and s.newest_run is not None
    done = threading.Event()
    s.subscribe(lambda ev: isinstance(ev, Idle) and done.set())
    m.release.set()
    assert done.wait(30) and s.last_result is not None and not s.busy


def test_events_are_frozen_dataclasses_told_apart_by_type():
    s = Session.load("demo:clamp", timeout_s=60)
    try:
        seen: list[SessionEvent] = []
        s.subscribe(seen.append)
        s.capture("0")
        assert [type(e) for e in seen] == [PlanChanged] and seen[0].plan == s.plan
        with pytest.raises(dataclasses.FrozenInstanceError):
            seen[0].plan = Plan()  # type: ignore[misc]
        s.run(timeout_s=60)
        types = [type(e) for e in seen]
        assert types[1] is RunStarted and types[-2:] == [ResultArrived, Idle]
        result = seen[-2]
        assert isinstance(result, ResultArrived) and result.result is s.last_result
        assert result.request_id == seen[1].request_id == seen[-1].request_id
    finally:
        s.close()


def test_a_notebook_reading_kind_and_value_still_works():
    s = Session.load("demo:clamp", timeout_s=60)
    try:
        seen: list[SessionEvent] = []
        s.subscribe(seen.append)
        s.capture("0")
        r = s.run(timeout_s=60)
        kinds = [e.kind for e in seen if e.kind not in ("progress", "observed")]
        assert kinds == ["plan", "started", "result", "idle"]
        assert seen[0].value is s.plan and seen[-2].value is r and seen[-1].value is None
    finally:
        s.close()


def test_a_subscriber_that_raises_does_not_hold_up_later_answers(capfd):
    s = Session.load("demo:clamp", timeout_s=60)
    try:
        raised = []

        def bad(ev: SessionEvent) -> None:
            if isinstance(ev, ResultArrived) and not raised:
                raised.append(ev)
                raise RuntimeError("a subscriber's bug")

        s.subscribe(bad)
        first = s.run(timeout_s=60)  # its answer is applied before the subscriber raises
        assert raised and s.last_result is first
        assert "a subscriber's bug" in capfd.readouterr().err  # the runner printed it
        second = s.run(timeout_s=60)
        assert s.last_result is second and second is not first and not s.busy
    finally:
        s.close()


def test_a_load_refused_for_its_code_runs_the_open_model_again(gated_session, tmp_path):
    """A load stops the run in flight; refused (its code was not trusted), it leaves the
    model open as it was, and that model runs again: the newest result is for the plan
    as it is now, not the one before the stopped run."""
    s, m = gated_session
    factory = tmp_path / "factory.py"
    factory.write_text("from torch import nn\n\ndef build():\n    return nn.Linear(3, 3)\n")
    seen: list[SessionEvent] = []
    s.subscribe(seen.append)
    m.release.clear()
    m.entered.clear()
    s.intervene("lin", Clamp(-0.1, 0.1))
    stopped = s.submit_run()
    assert stopped is not None and m.entered.wait(30)
    load = s.open_model(f"{factory}:build", trust=CodeTrust.from_data())
    held_back = s.submit_run()   # asked for while the load is on its way: held back
    assert held_back is None
    m.release.set()
    with pytest.raises(CodeTrustError):
        load.result(30)
    assert stopped.cancelled()
    deadline = time.monotonic() + 30
    while s.busy and time.monotonic() < deadline:   # the run again, on the runner's thread
        time.sleep(0.01)
    assert not s.busy
    failed = [i for i, ev in enumerate(seen) if isinstance(ev, LoadFailed)]
    results = [i for i, ev in enumerate(seen) if isinstance(ev, ResultArrived)]
    assert len(failed) == 1 and failed[0] < results[-1] and seen[failed[0]].code is not None
    assert s.model is not None and s.model.module is m
    want = compare(m, torch.tensor([[1.0, 2.0, 3.0]]), Plan(clamp={"lin": (-0.1, 0.1)}))
    assert torch.equal(s.last_result.output_with, want.output_with)


def test_a_failed_load_that_stopped_nothing_runs_nothing(gated_session, tmp_path):
    s, m = gated_session
    s.run(timeout_s=30)
    runs = s.runner.counts.runs_done
    load = s.open_model(str(tmp_path / "missing.py") + ":build")
    with pytest.raises(HookscopeError):
        load.result(30)
    s.run(timeout_s=30)   # the one run after: counted once
    assert s.runner.counts.runs_done == runs + 1
