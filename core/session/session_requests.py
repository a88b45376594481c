"""A session's side of its runner: which requests are still wanted, the answers in
the order they are applied, and waiting for one.

:class:`Requests` is owned by a :class:`~hookscope.core.session.session.Session`
(composition: it holds no reference back). It records each request the session
submits (the load in flight, the one run whose answer is still wanted) and queues
the runner's answers until the session applies them, on the session's ``post``
thread. :meth:`Requests.settle` tells the session what each answer is to it (the
load's, the newest run's, a replaced run's result still worth showing, or one to
drop) and does this object's own bookkeeping for it; the session writes its own
fields (:meth:`Session._apply <hookscope.core.session.session.Session._apply>`).
An answer to a replaced model or a replaced run is dropped, except a replaced run
that finished after the newest shown one (Live lets a nearly done run finish):
that result is shown while the newest runs.

Ordering without a lock held across ``submit``: the runner's thread may answer a
request before ``submit`` has returned its future to the session, and an answer
applied before its id was recorded would be taken for a replaced request's. Ids
only grow and every request of this runner is the session's, so an answer whose
id is above the newest one recorded waits in the queue; recording the id lets it
through (the session drains again right after). One thread applies answers at a
time, in the order they came.

Waiting is a :class:`~.runner_messages.RequestFuture`'s: :meth:`Requests.wait` turns
its timeout and cancellation into messages for a person.
"""

from __future__ import annotations

import enum
import threading
import weakref
from collections import deque
from concurrent.futures import CancelledError as FutureCancelled
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Callable

from ..base.errors import Cancelled as CancelledError
from ..base.errors import HookscopeError
from .runner_messages import (Cancelled, Failed, Finished, Listener, Loaded, Observed, Progress,
                              RequestFuture, RunnerEvent, Started)
from .session_types import LoadSetup


class Settled(enum.Enum):
    """What an answer is to the session (:meth:`Requests.settle`)."""

    LOAD = "the answer of the load in flight"
    OBSERVED = "the shapes an observing pass found"
    OLDER_RESULT = "the result of a replaced run, newer than the one shown: show it"
    NEWEST = "an answer about the newest run"
    DROPPED = "an answer about a replaced model or run"


class Requests:
    """The requests a session made that still matter, and the answers not yet applied."""

    def __init__(self) -> None:
        self._lock = threading.Lock()  # the queue, the newest recorded id, the drain flag
        self._answers: deque[RunnerEvent] = deque()
        self._recorded = 0  # the newest request id the session knows it made
        self._draining = False
        #: the load in flight (its answer sets the model), or ``None``
        self.load_id: int | None = None
        #: what to apply once that load arrives
        self.setup = LoadSetup()
        #: a run was stopped, or asked for and held back, while that load was on its way:
        #: should the load fail, the model still open runs again (nothing shown goes stale)
        self.run_lost = False
        #: the one run whose answer is still wanted, or ``None``
        self.newest_run: int | None = None
        #: the newest run whose result was shown: an older one never is
        self.shown_run = 0
        #: answers to older ids belong to a replaced model
        self.valid_from = 0
        #: counts loads: a run observes the tree once per model and input
        self.load_serial = 0
        self.observed_key: tuple | None = None
        self.observe_keys: dict[int, tuple] = {}

    @property
    def busy(self) -> bool:
        """A load or the newest run is waiting for its answer."""
        return self.load_id is not None or self.newest_run is not None

    # -- recording (the thread that submits) -----------------------------------------
    def record_load(self, future: RequestFuture, setup: LoadSetup) -> None:
        self.setup = setup
        self.load_id = future.request_id
        self._recorded_up_to(future.request_id)

    def record_run(self, future: RequestFuture, observe_key: tuple | None) -> None:
        rid = future.request_id
        if observe_key is not None:
            self.observe_keys[rid] = observe_key
        self.newest_run = rid
        self._recorded_up_to(rid)

    def _recorded_up_to(self, rid: int) -> None:
        with self._lock:
            self._recorded = max(self._recorded, rid)

    # -- answers -------------------------------------------------------------------
    def settle(self, ev: RunnerEvent) -> Settled:
        """What ``ev`` is to the session, with this object's bookkeeping for it done
        (the ``post`` thread, one answer at a time)."""
        rid = ev.request_id
        if rid == self.load_id:
            if not isinstance(ev, (Started, Progress)):
                self.load_id = None
            if isinstance(ev, Loaded):
                self.valid_from, self.observed_key, self.newest_run = rid, None, None
                self.load_serial += 1
            return Settled.LOAD
        if rid < self.valid_from:
            return Settled.DROPPED  # the model it ran on was replaced
        if isinstance(ev, Observed):
            key = self.observe_keys.pop(rid, None)
            if key is not None:
                self.observed_key = key
            return Settled.OBSERVED
        if rid != self.newest_run:
            # An older run the runner let finish (Live: it was nearly done) is shown
            # while the newest runs; anything else of a replaced run is dropped.
            if isinstance(ev, Finished) and self.newest_run is not None and rid > self.shown_run:
                self.shown_run = rid
                return Settled.OLDER_RESULT
            return Settled.DROPPED
        if isinstance(ev, (Finished, Failed, Cancelled)):
            self.newest_run = None
        if isinstance(ev, Finished):
            self.shown_run = rid
        return Settled.NEWEST

    def arrived(self, ev: RunnerEvent) -> None:
        """The runner's thread: queue an answer (the session then posts a drain)."""
        with self._lock:
            self._answers.append(ev)

    def _start_draining(self) -> bool:
        """Whether this caller applies the queued answers now (``False``: another
        drain, maybe further up this thread's stack, is at it and will see them)."""
        with self._lock:
            if self._draining:
                return False
            self._draining = True
            return True

    def _take(self) -> RunnerEvent | None:
        """The next answer to apply, or ``None`` (the drain is over): none queued,
        or the next one's request is not recorded yet."""
        with self._lock:
            if self._answers and self._answers[0].request_id <= self._recorded:
                return self._answers.popleft()
            self._draining = False
            return None

    def drain(self, apply: Callable[[RunnerEvent], None]) -> None:
        """``apply`` every answer that may be applied now, in order, unless another drain
        is at it (it will see them). A drain ended by an exception (a subscriber's) lets
        the next one start."""
        if not self._start_draining():
            return
        try:
            while (ev := self._take()) is not None:
                apply(ev)
        except BaseException:
            with self._lock:
                self._draining = False
            raise

    # -- waiting -------------------------------------------------------------------
    @staticmethod
    def wait(future: RequestFuture, timeout_s: float | None) -> Loaded | Finished:
        """The request's final answer; raises what it raised, or says why there is none."""
        try:
            return future.result(timeout_s)
        except FutureTimeout:
            raise HookscopeError(f"no answer within {timeout_s} s; the run goes on in the "
                                 "background") from None
        except FutureCancelled:
            raise CancelledError("run cancelled: a newer request replaced it") from None


def weak_listener(method: Callable[[RunnerEvent], None]) -> Listener:
    """A runner listener that calls the bound ``method`` while its object lives, and does
    nothing after: the runner does not keep its session alive."""
    ref = weakref.WeakMethod(method)

    def listener(ev: RunnerEvent) -> None:
        m = ref()
        if m is not None:
            m(ev)

    return listener
