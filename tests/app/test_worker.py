"""The worker thread on its own: runs off the GUI thread, coalesces, reports errors, stops."""

import threading

import pytest
import torch
from torch import nn

from hookscope.app.worker import ForwardWorker, Loaded, error_message
from hookscope.core import InputError, Plan, compare, load_model


class Gate(nn.Module):
    """A model whose forward blocks until the test opens the gate: makes 'a run is in
    flight' a state the test controls, with no sleeps."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(3, 2)
        self.entered = threading.Event()
        self.release = threading.Event()
        self.threads: set[str] = set()

    def forward(self, x):
        self.threads.add(threading.current_thread().name)
        self.entered.set()
        self.release.wait(30)
        return self.lin(x)


@pytest.fixture
def worker(qtbot):
    w = ForwardWorker()
    yield w
    w.shutdown()


def test_run_result_arrives_on_gui_thread_with_core_numbers(qtbot, worker):
    lm = load_model("demo:clamp")
    plan = Plan(capture=("0",), clamp={"0": (-0.5, 0.5)})
    seen_thread = []
    worker.finished.connect(lambda *_: seen_thread.append(threading.current_thread()))
    with qtbot.waitSignal(worker.finished, timeout=30_000) as blocker:
        rid = worker.submit_run(lm.module, "example", lm.example_input, plan, "cpu")
    got_id, result = blocker.args
    assert got_id == rid
    assert seen_thread == [threading.main_thread()]
    ref_lm = load_model("demo:clamp")
    ref = compare(ref_lm.module, ref_lm.example_input, plan)
    assert torch.equal(result.output_with, ref.output_with)
    assert torch.equal(result.output_without, ref.output_without)
    assert worker.runs_done == 1


def test_forward_runs_on_worker_thread(qtbot, worker):
    m = Gate()
    m.release.set()
    with qtbot.waitSignal(worker.finished, timeout=30_000):
        worker.submit_run(m, "[[1.0, 2.0, 3.0]]", None, Plan(), "cpu")
    assert m.threads and threading.main_thread().name not in m.threads


def test_observe_sends_a_fresh_tree(qtbot, worker):
    lm = load_model("demo:features")
    with qtbot.waitSignal(worker.observed, timeout=30_000) as blocker:
        worker.submit_run(lm.module, "example", lm.example_input, Plan(), "cpu", observe_tree=True)
    tree = blocker.args[1]
    assert tree.find("fc1").output_shape == (1, 8)
    assert tree.find("fc3").calls == 1


def test_burst_is_coalesced_newest_runs(qtbot, worker):
    m = Gate()
    results = []
    worker.finished.connect(lambda rid, r: results.append((rid, r)))
    first = worker.submit_run(m, "[[1.0, 2.0, 3.0]]", None, Plan(), "cpu")
    assert m.entered.wait(30)  # the first run is now in flight, blocked
    ids = [worker.submit_run(m, f"[[{i}.0, 2.0, 3.0]]", None, Plan(), "cpu") for i in range(50)]
    assert worker.runs_dropped == 49
    m.release.set()
    qtbot.waitUntil(lambda: len(results) == 2 and not worker.busy, timeout=30_000)
    assert [rid for rid, _ in results] == [first, ids[-1]]
    assert worker.runs_done == 2
    # the run that survived used the newest input (x[0] = 49)
    with torch.no_grad():
        expected = m.lin(torch.tensor([[49.0, 2.0, 3.0]]))
    assert torch.allclose(results[-1][1].output_with, expected)


def test_cancel_drops_pending_and_stops_the_run_in_flight(qtbot, worker):
    m = Gate()
    done, cancelled = [], []
    worker.finished.connect(lambda rid, r: done.append(rid))
    worker.cancelled.connect(cancelled.append)
    first = worker.submit_run(m, "[[1.0, 2.0, 3.0]]", None, Plan(), "cpu")
    assert m.entered.wait(30)
    worker.submit_run(m, "[[2.0, 2.0, 3.0]]", None, Plan(), "cpu")
    assert worker.cancel()
    m.release.set()  # the run in flight reaches its next layer and stops there
    qtbot.waitUntil(lambda: not worker.busy and bool(cancelled), timeout=30_000)
    assert cancelled == [first] and done == []
    assert worker.runs_dropped == 2
    assert not m.lin._forward_pre_hooks and not m.lin._forward_hooks
    # the worker is still usable
    nxt = worker.submit_run(m, "[[3.0, 2.0, 3.0]]", None, Plan(), "cpu")
    qtbot.waitUntil(lambda: done == [nxt], timeout=30_000)


def test_user_error_comes_back_as_message_and_next_run_works(qtbot, worker):
    lm = load_model("demo:clamp")
    with qtbot.waitSignal(worker.failed, timeout=30_000) as blocker:
        bad = worker.submit_run(lm.module, "[[1.0, 2.0", lm.example_input, Plan(), "cpu")
    rid, message = blocker.args
    assert rid == bad and message and not message.startswith("internal error")
    with qtbot.waitSignal(worker.finished, timeout=30_000):
        worker.submit_run(lm.module, "example", lm.example_input, Plan(), "cpu")
    assert worker.runs_failed == 1 and worker.runs_done == 1


def test_unexpected_exception_is_an_internal_error(qtbot, worker):
    class Broken(nn.Module):
        def forward(self, x):
            raise ZeroDivisionError("boom")

    # The core turns a model's own error into ForwardError; an error outside the
    # forward (here: a plan whose resolve blows up) must still come back as a message.
    class BadPlan(Plan):
        def resolve(self, module):
            raise ZeroDivisionError("boom")

    with qtbot.waitSignal(worker.failed, timeout=30_000) as blocker:
        worker.submit_run(Broken(), "[[1.0]]", None, BadPlan(), "cpu")
    assert blocker.args[1].startswith("internal error: ZeroDivisionError")
    assert error_message(InputError("say what to do")) == "say what to do"


def test_load_on_worker(qtbot, worker):
    with qtbot.waitSignal(worker.loaded, timeout=30_000) as blocker:
        rid = worker.submit_load("demo:cnn")
    got, payload = blocker.args
    assert got == rid and isinstance(payload, Loaded)
    assert payload.tree.find("conv1").type_name == "Conv2d"
    with qtbot.waitSignal(worker.failed, timeout=30_000) as blocker:
        worker.submit_load("demo:nope")
    assert "unknown demo" in blocker.args[1]


def test_shutdown_during_run_waits_for_thread(qtbot):
    w = ForwardWorker()
    m = Gate()
    w.submit_run(m, "[[1.0, 2.0, 3.0]]", None, Plan(), "cpu")
    assert m.entered.wait(30)
    w.submit_run(m, "[[2.0, 2.0, 3.0]]", None, Plan(), "cpu")  # pending: must be dropped
    m.release.set()
    assert w.shutdown()
    assert not w.is_running
    assert w.runs_done == 0 and w.runs_dropped == 2  # in flight: stopped at its next layer
    assert w.shutdown()  # idempotent
    w.submit_run(m, "[[1.0, 2.0, 3.0]]", None, Plan(), "cpu")  # ignored after shutdown
    assert not w.busy


def test_busy_until_the_answer_is_delivered_on_the_gui_thread(qtbot, worker):
    """A result emitted by the worker but not yet received by the GUI thread still
    counts as busy, so 'idle' never means 'the newest result is still in the queue'."""
    from PySide6.QtCore import Qt

    m = Gate()
    m.release.set()
    emitted = threading.Event()
    worker._runner.finished.connect(lambda *_: emitted.set(), Qt.ConnectionType.DirectConnection)
    worker.submit_run(m, "[[1.0, 2.0, 3.0]]", None, Plan(), "cpu")
    assert emitted.wait(30)  # emitted in the worker thread; GUI events not processed yet
    assert worker.busy
    with qtbot.waitSignal(worker.finished, timeout=30_000):
        pass
    assert not worker.busy


def test_capture_statistics_are_computed_on_the_worker(qtbot, worker):
    lm = load_model("demo:cnn")
    plan = Plan(capture=("conv1", "fc"), clamp={"conv1": (-0.5, 0.5)})
    with qtbot.waitSignal(worker.finished, timeout=30_000) as blocker:
        worker.submit_run(lm.module, "example", lm.example_input, plan, "cpu")
    result = blocker.args[1]
    for recs in result.captures.values():
        for rec in recs:
            assert rec.stats_ready  # nothing left for the GUI thread to compute


class GateInLeaf(nn.Module):
    """Blocks inside its first leaf, so the run is in flight before a stop point is passed."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = Gate()
        self.out = nn.Linear(2, 2)

    def forward(self, x):
        return self.out(self.gate(x))


def test_cancellable_run_stops_when_a_newer_one_arrives(qtbot, worker):
    m = GateInLeaf()
    finished, cancelled = [], []
    worker.finished.connect(lambda rid, r: finished.append(rid))
    worker.cancelled.connect(cancelled.append)
    first = worker.submit_run(m, "[[1.0, 2.0, 3.0]]", None, Plan(), "cpu", cancellable=True)
    assert m.gate.entered.wait(30)
    last = worker.submit_run(m, "[[9.0, 2.0, 3.0]]", None, Plan(), "cpu", cancellable=True)
    m.gate.release.set()  # the first run reaches its next stop point and ends there
    qtbot.waitUntil(lambda: finished == [last] and not worker.busy, timeout=30_000)
    assert cancelled == [first]
    assert all(not mod._forward_hooks and not mod._forward_pre_hooks for mod in m.modules())


def test_baseline_reused_while_only_the_plan_changes(qtbot, worker):
    lm = load_model("demo:cnn")
    results = []
    worker.finished.connect(lambda rid, r: results.append(r))
    for lo in (-0.5, -0.3):
        worker.submit_run(lm.module, "", lm.example_input, Plan(clamp={"conv1": (lo, 0.5)}), "cpu")
        qtbot.waitUntil(lambda: not worker.busy, timeout=30_000)
    worker.submit_run(lm.module, "random:1x1x8x8", lm.example_input,
                      Plan(clamp={"conv1": (-0.3, 0.5)}), "cpu")
    qtbot.waitUntil(lambda: not worker.busy, timeout=30_000)
    assert [r.baseline_reused for r in results] == [False, True, False]  # new input: new baseline
    fresh = compare(lm.module, lm.example_input, Plan(clamp={"conv1": (-0.3, 0.5)}))
    assert torch.equal(results[1].output_with, fresh.output_with)
    assert torch.equal(results[1].output_without, fresh.output_without)


def test_rewritten_input_file_gets_a_fresh_baseline(qtbot, worker, tmp_path):
    import numpy as np

    lm = load_model("demo:clamp")
    f = tmp_path / "x.npy"
    results = []
    worker.finished.connect(lambda rid, r: results.append(r))
    plan = Plan(clamp={"0": (-0.5, 0.5)})
    for values in ([[1.0, 2.0, 3.0]], [[-4.0, 5.0, 9.0]]):
        np.save(f, np.array(values, dtype=np.float32))  # same text in the input box
        worker.submit_run(lm.module, str(f), lm.example_input, plan, "cpu")
        qtbot.waitUntil(lambda: not worker.busy, timeout=30_000)
    assert [r.baseline_reused for r in results] == [False, False]
    with torch.no_grad():
        assert torch.equal(results[1].output_without, lm.module(torch.tensor([[-4.0, 5.0, 9.0]])))
