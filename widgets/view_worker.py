"""The one background thread where layer panels make the pictures their runner did
not prepare: a view switched by hand, a resized panel, a zoom or pan re-pooled.

:class:`ViewWorker` runs each job in a single worker thread
(``ThreadPoolExecutor(max_workers=1)``), newest request wins per owner (a
panel): a job replaced before it began is skipped, and an answer that arrives
after a newer request of its owner is dropped. The answer comes back to the GUI
thread through one queued signal, where the owner's ``deliver`` is called
(never for an owner Qt has deleted since). The owner keeps its current picture
until then. Jobs are core's pure functions (``hookscope.core.views``): nothing
here touches a widget off the GUI thread.
"""

from __future__ import annotations

import itertools
import threading
import traceback
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable

from PySide6.QtCore import QObject, Qt, Signal, Slot
from shiboken6 import isValid


class ViewWorker(QObject):
    """One thread for view work, shared by a window's panels (see the module docstring)."""

    _answered = Signal(object)   # emitted in the worker thread, received on the GUI thread
    #: On the GUI thread, when the last job waiting has been answered or dropped.
    drained = Signal()

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("viewWorker")
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="hookscope-views")
        self._tickets = itertools.count(1)
        self._lock = threading.Lock()
        self._newest: dict[int, int] = {}      # owner id -> its newest ticket
        self._waiting = 0                      # jobs submitted, not yet answered or dropped
        self._open = True
        self._answered.connect(self._deliver, Qt.ConnectionType.QueuedConnection)

    def submit(self, owner: QObject, job: Callable[[], Any],
               deliver: Callable[[Any], None]) -> None:
        """Run ``job()`` off the GUI thread and call ``deliver(answer)`` on it, unless
        ``owner`` asked for something newer since (or is gone)."""
        if not self._open:
            return
        key = id(owner)
        with self._lock:
            ticket = next(self._tickets)
            self._newest[key] = ticket
            self._waiting += 1
        self._pool.submit(self._run, owner, key, ticket, job, deliver)

    def forget(self, owner: QObject) -> None:
        """Drop every answer still due to ``owner`` (it moved on: drew what it had)."""
        with self._lock:
            self._newest.pop(id(owner), None)

    @property
    def busy(self) -> bool:
        """A job is waiting, running, or its answer is on its way."""
        return self._waiting > 0

    def shutdown(self) -> None:
        """Run nothing more and deliver nothing more (idempotent); the job in flight ends
        on its own (the thread does not outlive it)."""
        self._open = False
        self._pool.shutdown(wait=False, cancel_futures=True)

    # -- the worker thread ---------------------------------------------------------
    def _current(self, key: int, ticket: int) -> bool:
        with self._lock:
            return self._newest.get(key) == ticket

    def _run(self, owner: QObject, key: int, ticket: int, job: Callable[[], Any],
             deliver: Callable[[Any], None]) -> None:
        answer: Any = None
        ok = False
        if self._open and self._current(key, ticket):   # replaced before it began: skipped
            try:
                answer, ok = job(), True
            except Exception:  # noqa: BLE001 - a bug in a view must not stop the others
                traceback.print_exc()
        try:
            self._answered.emit((owner, key, ticket, deliver, answer, ok))
        except RuntimeError:   # the worker itself is gone (its window closed)
            pass

    # -- the GUI thread -------------------------------------------------------------
    @Slot(object)
    def _deliver(self, message: tuple) -> None:
        owner, key, ticket, deliver, answer, ok = message
        self._waiting -= 1
        if ok and self._open and self._current(key, ticket) and isValid(owner):
            with self._lock:
                self._newest.pop(key, None)
            deliver(answer)
        if self._waiting == 0 and self._open:
            self.drained.emit()
