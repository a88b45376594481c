"""The Qt relay: runner answers reach the session on the GUI thread, at one place, and
nothing arrives after shutdown. (Coalescing, cancelling, errors, baseline reuse and
progress are the core runner's, tested without Qt in tests/core/test_runner.py.)"""

import threading
from pathlib import Path

import pytest
import torch
from PySide6.QtWidgets import QApplication

from hookscope.app.worker import ForwardWorker
from hookscope.core import Plan, compare, load_model

GATED_SPEC = f"{Path(__file__).with_name('gated_model.py')}:make"


@pytest.fixture
def worker(qtbot):
    w = ForwardWorker()
    yield w
    w.shutdown()


def load(qtbot, worker, spec, **kw):
    s = worker.session
    s.open_model(spec, run_after=False, **kw)
    qtbot.waitUntil(lambda: s.model is not None and not s.busy, timeout=30_000)
    return s


def test_answers_reach_the_session_on_the_gui_thread_with_core_numbers(qtbot, worker):
    s = load(qtbot, worker, "demo:clamp", plan=Plan(capture=("0",), clamp={"0": (-0.5, 0.5)}))
    threads = []
    s.subscribe(lambda ev: threads.append((ev.kind, threading.current_thread())))
    rid = s.submit_run()
    qtbot.waitUntil(lambda: s.last_result is not None and not s.busy, timeout=30_000)
    assert {t for _, t in threads} == {threading.main_thread()}
    assert [k for k, _ in threads][-2:] == ["result", "idle"]
    ref_lm = load_model("demo:clamp")
    ref = compare(ref_lm.module, ref_lm.example_input, s.plan)
    assert torch.equal(s.last_result.output_with, ref.output_with)
    assert torch.equal(s.last_result.output_without, ref.output_without)
    assert rid is not None and worker.runs_done == 1


def test_forward_runs_off_the_gui_thread(qtbot, worker):
    s = load(qtbot, worker, GATED_SPEC)
    ran_on = []
    s.model.module.lin.register_forward_hook(lambda *_: ran_on.append(threading.current_thread()))
    s.submit_run()
    qtbot.waitUntil(lambda: s.last_result is not None and not s.busy, timeout=30_000)
    assert ran_on and threading.main_thread() not in ran_on


def test_busy_until_the_answer_is_delivered_on_the_gui_thread(qtbot, worker):
    """An answer the runner has sent but the GUI thread has not yet received still
    counts as busy, so 'idle' never means 'the newest result is still in the queue'."""
    s = load(qtbot, worker, "demo:clamp")
    sent = threading.Event()
    inner = s.runner._listener
    s.runner._listener = lambda ev: (inner(ev), sent.set() if type(ev).__name__ == "Finished" else None)
    s.submit_run()
    assert sent.wait(30)  # answered in the runner thread; GUI events not processed yet
    assert worker.busy and s.last_result is None
    qtbot.waitUntil(lambda: not worker.busy, timeout=30_000)
    assert s.last_result is not None


def test_shutdown_during_a_held_run_returns_and_delivers_nothing(qtbot):
    w = ForwardWorker()
    s = load(qtbot, w, GATED_SPEC)
    m = s.model.module
    m.release.clear()
    m.entered.clear()
    seen = []
    s.subscribe(seen.append)
    s.submit_run()
    assert m.entered.wait(30)
    s.submit_run()                    # pending: dropped at shutdown
    assert w.shutdown(timeout_s=0) is False  # returns at once; the forward is still held
    m.release.set()                   # it stops at its next layer and the thread ends
    qtbot.waitUntil(lambda: not w.is_running, timeout=30_000)
    QApplication.processEvents()      # any queued delivery is processed now (there must be none)
    assert [e.kind for e in seen if e.kind in ("result", "error", "cancelled")] == []
    assert w.runs_done == 0
    assert w.shutdown()               # idempotent
    assert s.submit_run() is not None and not w.is_running  # ignored after shutdown


def test_progress_reaches_the_session_on_the_gui_thread(qtbot):
    from hookscope.core.session.runner import LocalRunner

    w = ForwardWorker(runner_factory=lambda listener: LocalRunner(listener, progress_every_s=0))
    try:
        s = load(qtbot, w, "demo:cnn")
        got = []
        s.subscribe(lambda ev: ev.kind == "progress" and got.append((ev.value, threading.current_thread())))
        s.submit_run()
        qtbot.waitUntil(lambda: s.last_result is not None and not s.busy, timeout=30_000)
        assert got and {t for _, t in got} == {threading.main_thread()}
        done = [p.done for p, _ in got]
        assert done == sorted(done) and got[-1][0].done == got[-1][0].total
    finally:
        w.shutdown()
