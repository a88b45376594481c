"""The one background thread where layer panels make the pictures their runner did
not prepare: a view switched by hand, a resized panel, a zoom or pan re-pooled.

:class:`ViewWorker` runs each job in a single worker thread
(``ThreadPoolExecutor(max_workers=1)``), newest request wins per owner (a
panel): a job replaced before it began is skipped, and an answer that arrives
after a newer request of its owner is dropped. The answer comes back to the GUI
thread through the application's :class:`~.gui_relay.GuiRelay`, where the owner's
``deliver`` is called (never for an owner Qt has deleted since). The owner keeps its
current picture until then. Jobs are core's pure functions (``hookscope.core.views``):
nothing here touches a widget off the GUI thread, and the thread never holds one: the
owner and its ``deliver`` stay on the GUI thread, kept by the job's ticket, so a panel
or window closed while its job runs is destroyed on the GUI thread, and the answer of a
worker gone since is simply dropped.
"""

from __future__ import annotations

import itertools
import threading
import traceback
import weakref
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable

from PySide6.QtCore import QObject, Signal
from shiboken6 import isValid

from .gui_relay import GuiRelay, gui_relay


class _Tickets:
    """What the worker thread shares with the GUI thread: plain Python, no Qt object."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.newest: dict[int, int] = {}      # owner id -> its newest ticket
        self.open = True

    def current(self, key: int, ticket: int) -> bool:
        with self.lock:
            return self.newest.get(key) == ticket


def _work(tickets: _Tickets, relay: GuiRelay, worker: "weakref.ref[ViewWorker]", key: int,
          ticket: int, job: Callable[[], Any]) -> None:
    """The worker thread: run ``job`` unless replaced or shut down, hand the answer over."""
    answer: Any = None
    ok = False
    if tickets.open and tickets.current(key, ticket):   # replaced before it began: skipped
        try:
            answer, ok = job(), True
        except Exception:  # noqa: BLE001 - a bug in a view must not stop the others
            traceback.print_exc()
    relay.call_soon(lambda: _answered(worker, ticket, answer, ok))


def _answered(worker: "weakref.ref[ViewWorker]", ticket: int, answer: Any, ok: bool) -> None:
    w = worker()
    if w is not None and isValid(w):
        w._deliver(ticket, answer, ok)


class ViewWorker(QObject):
    """One thread for view work, shared by a window's panels (see the module docstring)."""

    #: On the GUI thread, when the last job waiting has been answered or dropped.
    drained = Signal()

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("viewWorker")
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="hookscope-views")
        self._relay = gui_relay()
        self._weak = weakref.ref(self)
        self._tickets_made = itertools.count(1)
        self._tickets = _Tickets()
        #: ticket -> (owner, owner's key, deliver): kept here, on the GUI thread only
        self._due: dict[int, tuple[Any, int, Callable[[Any], None]]] = {}

    def submit(self, owner: QObject, job: Callable[[], Any],
               deliver: Callable[[Any], None]) -> None:
        """Run ``job()`` off the GUI thread and call ``deliver(answer)`` on it, unless
        ``owner`` asked for something newer since (or is gone). ``job`` must hold no Qt
        object (core's functions and their data): the thread drops it."""
        if not self._tickets.open:
            return
        key = id(owner)
        ticket = next(self._tickets_made)
        with self._tickets.lock:
            self._tickets.newest[key] = ticket
        self._due[ticket] = (owner, key, deliver)
        self._pool.submit(_work, self._tickets, self._relay, self._weak, key, ticket, job)

    def forget(self, owner: QObject) -> None:
        """Drop every answer still due to ``owner`` (it moved on: drew what it had)."""
        with self._tickets.lock:
            self._tickets.newest.pop(id(owner), None)

    @property
    def busy(self) -> bool:
        """A job is waiting, running, or its answer is on its way."""
        return bool(self._due)

    def shutdown(self) -> None:
        """Run nothing more and deliver nothing more (idempotent); the job in flight ends
        on its own (the thread does not outlive it)."""
        self._tickets.open = False
        self._due.clear()
        self._pool.shutdown(wait=False, cancel_futures=True)

    # -- the GUI thread -------------------------------------------------------------
    def _deliver(self, ticket: int, answer: Any, ok: bool) -> None:
        due = self._due.pop(ticket, None)
        if due is None:   # shut down since
            return
        owner, key, deliver = due
        if ok and self._tickets.open and self._tickets.current(key, ticket) and isValid(owner):
            with self._tickets.lock:
                self._tickets.newest.pop(key, None)
            deliver(answer)
        if not self._due and self._tickets.open:
            self.drained.emit()
