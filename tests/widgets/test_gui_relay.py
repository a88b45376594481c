"""Answers from background threads reach the GUI thread without a thread ever holding,
or destroying, a Qt object: the application's relay, a gate that shuts, functions kept
on the GUI thread by number, and the view worker built on them."""

from __future__ import annotations

import threading
import weakref

from PySide6.QtCore import QCoreApplication, QEvent, QObject

from hookscope.widgets.gui_relay import Gate, gui_relay, keep
from hookscope.widgets.view_worker import ViewWorker


def _dies_where(obj: QObject) -> list[str]:
    """The names of the threads ``obj``'s Python wrapper is freed on (one, once freed)."""
    where: list[str] = []
    weakref.finalize(obj, lambda: where.append(threading.current_thread().name))
    return where


def _in_thread(fn) -> None:
    t = threading.Thread(target=fn, name="not-the-gui")
    t.start()
    t.join(10)


def test_the_relay_is_one_object_of_the_application_and_runs_calls_on_the_gui_thread(qtbot):
    relay = gui_relay()
    assert relay is gui_relay() and relay.parent() is QCoreApplication.instance()
    ran: list[str] = []
    _in_thread(lambda: relay.call_soon(lambda: ran.append(threading.current_thread().name)))
    qtbot.waitUntil(lambda: bool(ran), timeout=5_000)
    assert ran == ["MainThread"]


def test_the_relay_is_never_made_off_the_gui_thread(monkeypatch):
    import hookscope.widgets.gui_relay as module

    monkeypatch.setattr(module, "_relay", None)
    errors: list[BaseException] = []

    def make() -> None:
        try:
            gui_relay()
        except RuntimeError as exc:
            errors.append(exc)

    _in_thread(make)
    assert len(errors) == 1 and "GUI thread" in str(errors[0]) and module._relay is None


def test_a_shut_gate_runs_nothing_posted_before_or_after(qtbot):
    gate = Gate()
    ran: list[str] = []
    _in_thread(lambda: gate.post(lambda: ran.append("before")))   # queued, not yet run
    gate.close()
    _in_thread(lambda: gate.post(lambda: ran.append("after")))
    marker: list[int] = []
    gui_relay().call_soon(lambda: marker.append(1))   # runs after everything queued before it
    qtbot.waitUntil(lambda: bool(marker), timeout=5_000)
    assert ran == []


def test_a_kept_function_runs_once_on_the_gui_thread_and_what_it_holds_dies_there(qtbot):
    held = QObject()
    dies = _dies_where(held)
    calls: list[tuple[int, str]] = []

    def answer(value: int, mine: QObject = held) -> None:
        calls.append((value, threading.current_thread().name))

    kept = keep(answer)
    del answer, held
    _in_thread(lambda: (kept(7), kept(8)))   # a second call finds nothing kept
    qtbot.waitUntil(lambda: bool(dies), timeout=5_000)
    assert calls == [(7, "MainThread")] and dies == ["MainThread"]


def test_a_view_worker_closed_while_its_job_runs_never_holds_the_panel_in_its_thread(qtbot):
    owner = QObject()   # the panel the job is for
    dies = _dies_where(owner)
    worker = ViewWorker()
    started, release = threading.Event(), threading.Event()
    delivered: list[int] = []

    def job() -> int:
        started.set()
        release.wait(10)
        return 1

    worker.submit(owner, job, delivered.append)
    assert started.wait(10) and worker.busy
    worker.deleteLater()   # its window closed while the job ran
    QCoreApplication.sendPostedEvents(None, QEvent.Type.DeferredDelete)
    del worker, owner
    release.set()
    qtbot.waitUntil(lambda: bool(dies), timeout=5_000)
    marker: list[int] = []
    gui_relay().call_soon(lambda: marker.append(1))   # after the job's answer, if any came
    qtbot.waitUntil(lambda: bool(marker), timeout=5_000)
    assert dies == ["MainThread"] and delivered == []


def test_a_view_worker_delivers_the_newest_answer_of_each_owner(qtbot):
    owner = QObject()
    worker = ViewWorker()
    release = threading.Event()
    delivered: list[str] = []
    worker.submit(owner, lambda: (release.wait(10), "old")[1], delivered.append)
    worker.submit(owner, lambda: "new", delivered.append)
    release.set()
    qtbot.waitUntil(lambda: not worker.busy, timeout=5_000)
    assert delivered == ["new"]
    worker.shutdown()
