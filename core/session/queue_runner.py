"""What every runner shares: a thread, the waiting load and run, newest wins.

:class:`QueueRunner` implements the runner interface described in
:mod:`.runner` (submit, cancel, close, counts, in_flight); a runner built on it
says only how a load and a run are done (:class:`~.runner.LocalRunner` here,
the Ray runner in ``core/remote``). The helpers every runner uses (an error's
one-line message, whether two inputs hold the same values) live here too.
"""

from __future__ import annotations

import itertools
import threading
import time
import traceback
from concurrent.futures import InvalidStateError
from typing import Any

import torch

from ..base.errors import Cancelled as CancelledError
from ..base.errors import ForwardError, HookscopeError
from ..base.nested import tensor_leaves
from ..base.read_files import ReadFiles
from .runner_messages import (Cancelled, Counts, Failed, Finished, Listener, Loaded, LoadRequest,
                              Request, RequestFuture, RunnerEvent, RunRequest, Started)
from ..base.user_text import safe_str
from ..engine.record_stats import reference_of
from ..views.display import prepare_display



# -- helpers -----------------------------------------------------------------
def same_values(a: Any, b: Any) -> bool:
    """Two (nested) inputs with the same tensors, value for value."""
    la, lb = tensor_leaves(a), tensor_leaves(b)
    return ([k for k, _ in la] == [k for k, _ in lb]
            and all(x.dtype == y.dtype and x.shape == y.shape and torch.equal(x, y)
                    for (_, x), (_, y) in zip(la, lb)))


def error_message(exc: BaseException) -> str:
    """The text shown to a person for anything a request raised."""
    text = safe_str(exc)  # a model's exception may fail even at being shown
    if isinstance(exc, HookscopeError):
        return text
    if not isinstance(exc, Exception):  # KeyboardInterrupt, SystemExit, a custom BaseException
        detail = f": {text}" if text else ""
        return (f"the model raised {type(exc).__name__}{detail}; that run was stopped and its "
                "hooks removed. Fix the model's code, or run again")
    return f"internal error: {type(exc).__name__}: {text}"


def weights_version(module: torch.nn.Module) -> tuple:
    """Which parameter and buffer objects the module has and how often each was changed in
    place: a module its caller holds may be trained between two runs (an optimizer step,
    ``load_state_dict``), and a baseline computed before must not be reused after."""
    return tuple((id(t), t._version) for t in itertools.chain(module.parameters(), module.buffers()))


def leaf_count(module: torch.nn.Module) -> int:
    return sum(1 for m in module.modules() if next(m.children(), None) is None)


class Job:
    """One request on its way through the thread."""

    def __init__(self, rid: int, request: Request) -> None:
        self.rid = rid
        self.request = request
        self.future = RequestFuture(rid)
        self.settled = False  # the runner has settled (or cancelled) the future itself
        self.stop = False
        self.t0 = 0.0
        self.done = 0
        self.total = 1
        self.last_progress = 0.0





class QueueRunner:
    """The request queue every runner shares: one daemon thread, newest request wins.

    It holds the waiting load and the waiting run (one slot each), the job in
    flight, and the interface (``submit``/``cancel``/``close``/``counts``/
    ``in_flight``); its thread takes the waiting load before the waiting run
    and answers each with :class:`Started`, then what :meth:`_load` or
    :meth:`_run` returns, or :class:`Cancelled`/:class:`Failed` for what they
    raise. A subclass says how a load and a run are done, and may hook
    :meth:`_stopping` (a cancel reached the job in flight) and :meth:`_closed`.

    ``progress_every_s``: the least time between two :class:`Progress`
    answers of one request (0: one per layer call, for tests).
    """

    #: Attach display-ready numbers to every result (:func:`attach_display`): set by a
    #: front end that draws them (the window); a script or the CLI does without.
    make_display = False

    def __init__(self, listener: Listener | None, progress_every_s: float, thread_name: str) -> None:
        self._listener = listener
        self._progress_every = progress_every_s
        self._ids = itertools.count(1)
        self._cv = threading.Condition()
        self._pending_run: Job | None = None
        self._pending_load: Job | None = None
        self._current: Job | None = None
        self._closing = False
        self.counts = Counts()
        #: where the files this runner's jobs open are recorded (the session's registry)
        self.reads: ReadFiles | None = None
        # When the last run finished: whether a run in flight is worth finishing
        # when a newer one arrives (see finish_in_flight).
        self._last_result_t: float | None = None
        # The thread waits for the first submit, which cannot come before the
        # subclass's constructor returns: its own state may be set after this.
        self._thread = threading.Thread(target=self._loop, name=thread_name, daemon=True)
        self._thread.start()

    # -- the interface (any thread) ---------------------------------------------
    def submit(self, request: Request) -> RequestFuture:
        job = Job(next(self._ids), request)
        replaced: list[Job] = []  # requests that end here without an answer
        with self._cv:
            if self._closing:
                self.counts.dropped += 1
                replaced.append(job)  # a closed runner takes nothing
            else:
                if self._pending_run is not None:
                    self.counts.dropped += 1
                    replaced.append(self._pending_run)
                    self._pending_run = None
                if isinstance(request, LoadRequest):
                    if self._pending_load is not None:
                        replaced.append(self._pending_load)
                    self._pending_load = job
                else:
                    self._pending_run = job
                current = self._current
                if current is not None and not self._keeps_running(current, request):
                    current.stop = True  # newest wins: the run in flight is stale
                self._cv.notify()
        _cancel_futures(replaced)
        # Added after the queueing: a caller's future.cancel() drops or stops its request.
        job.future.add_done_callback(lambda _f: self._forget(job))
        return job.future

    def _forget(self, job: Job) -> None:
        """``job``'s future was cancelled by its caller: drop it, or stop it at its next layer."""
        if job.settled:
            return
        with self._cv:
            if self._pending_run is job:
                self._pending_run = None
                self.counts.dropped += 1
            elif self._pending_load is job:
                self._pending_load = None
            stopping = self._current is job
            if stopping:
                job.stop = True
        if stopping:
            self._stopping(job)

    def _keeps_running(self, current: "Job", request: Request) -> bool:
        """Whether the run in flight finishes although ``request`` came after it (lock held).

        Only a run of the same model, replaced by a run: a load, or a run on another
        model, always stops it. See :func:`finish_in_flight` for the rule.
        """
        old = current.request
        if not (isinstance(old, RunRequest) and isinstance(request, RunRequest)
                and old.model is request.model and self._last_result_t is not None):
            return False
        return finish_in_flight(current.done, current.total,
                                time.perf_counter() - self._last_result_t)

    def cancel(self) -> bool:
        with self._cv:
            waiting = [j for j in (self._pending_run, self._pending_load) if j is not None]
            self.counts.dropped += sum(isinstance(j.request, RunRequest) for j in waiting)
            self._pending_run = self._pending_load = None
            current = self._current
            if current is not None:
                current.stop = True
        _cancel_futures(waiting)
        if current is not None:
            self._stopping(current)
        return bool(waiting) or current is not None

    def close(self, timeout_s: float = 1.0) -> bool:
        with self._cv:
            self._closing = True
            self._listener = None
            waiting = [j for j in (self._pending_run, self._pending_load) if j is not None]
            self._pending_run = self._pending_load = None
            if self._current is not None:
                self._current.stop = True
            self._cv.notify()
        _cancel_futures(waiting)
        self._thread.join(timeout_s)
        self._closed()
        return not self._thread.is_alive()

    @property
    def in_flight(self) -> int | None:
        job = self._current
        return job.rid if job is not None else None

    @property
    def is_alive(self) -> bool:
        """The runner's own thread is alive (it ends at :meth:`close`)."""
        return self._thread.is_alive()

    # -- what a subclass says ------------------------------------------------
    def _load(self, job: Job, req: LoadRequest) -> RunnerEvent | list[RunnerEvent]:
        """Do a load (in the runner's thread); its final answer, or answers ending with it."""
        raise NotImplementedError

    def _run(self, job: Job, req: RunRequest) -> RunnerEvent | list[RunnerEvent]:
        """Do a run (in the runner's thread); its final answer, or answers ending with it."""
        raise NotImplementedError

    def _stopping(self, job: Job) -> None:
        """A cancel set ``job.stop`` on the job in flight (the caller's thread, after the lock)."""

    def _closed(self) -> None:
        """:meth:`close` has waited for the thread (the caller's thread)."""

    # -- the thread ----------------------------------------------------------
    def _emit(self, event: RunnerEvent) -> None:
        listener = self._listener
        if listener is None:
            return
        try:
            listener(event)
        except BaseException:  # noqa: BLE001 - a listener's bug must not end the thread
            traceback.print_exc()

    def _loop(self) -> None:
        while True:
            with self._cv:
                while not self._closing and self._pending_load is None and self._pending_run is None:
                    self._cv.wait()
                if self._closing:
                    self._current = None
                    return
                job = self._pending_load or self._pending_run
                assert job is not None  # the wait above ends only with a job pending
                if job is self._pending_load:
                    self._pending_load = None
                else:
                    self._pending_run = None
                self._current = job
            try:
                if self.reads is not None:
                    with self.reads.recording():
                        self._do(job)
                else:
                    self._do(job)
            finally:
                with self._cv:
                    self._current = None

    def _do(self, job: Job) -> None:
        job.t0 = time.perf_counter()
        self._emit(Started(job.rid))
        try:
            if isinstance(job.request, LoadRequest):
                answer = self._load(job, job.request)
            else:
                answer = self._run(job, job.request)
            events = answer if isinstance(answer, list) else [answer]
        except CancelledError:
            with self._cv:
                self.counts.dropped += 1
            events = [Cancelled(job.rid)]
        except BaseException as exc:  # noqa: BLE001 - whatever a model throws is a message
            if isinstance(exc, Exception) and not isinstance(exc, HookscopeError):
                traceback.print_exception(exc)  # a bug: keep its traceback for the terminal
            with self._cv:
                if isinstance(job.request, RunRequest):
                    self.counts.runs_failed += 1
            events = [Failed(job.rid, error_message(exc), exc)]
        if self.make_display and isinstance(job.request, RunRequest):
            attach_display(job.request, events)
        if isinstance(job.request, RunRequest) and any(isinstance(e, Finished) for e in events):
            with self._cv:
                self._last_result_t = time.perf_counter()
        for event in events:
            self._emit(event)
        _settle(job, events[-1])  # after the listener heard it: a waiter finds it applied


def _cancel_futures(jobs: list[Job]) -> None:
    """The futures of requests that end without an answer (outside the runner's lock:
    a future's callbacks run here)."""
    for job in jobs:
        job.settled = True
        job.future.cancel()


def _settle(job: Job, final: RunnerEvent) -> None:
    """Settle ``job``'s future with its final answer (see :class:`RequestFuture`)."""
    job.settled = True
    fut = job.future
    if isinstance(final, Cancelled):
        fut.cancel()
        return
    try:
        if isinstance(final, Failed):
            error = final.error
            if not isinstance(error, HookscopeError):
                error = ForwardError(final.message)
                error.__cause__ = final.error
            fut.set_exception(error)
        elif isinstance(final, (Loaded, Finished)):
            fut.set_result(final)
    except InvalidStateError:
        pass  # its caller cancelled it while it ran (the run stopped, or finished anyway)


def attach_display(req: RunRequest, events: list[RunnerEvent]) -> None:
    """Give each finished result its display-ready numbers (core.views' ``prepare_display``),
    here in the runner's thread, so the window's GUI thread only swaps pictures in."""
    for ev in events:
        if isinstance(ev, Finished):
            try:
                ev.result.display = prepare_display(ev.result, reference_of, req.model.meaning,
                                                    req.input_text, req.model.example_input,
                                                    req.shapes)
            except Exception:  # noqa: BLE001 - a bug here must not cost the result: the GUI prepares it
                traceback.print_exc()


#: How soon after a result a newer request may still restart the run in flight (s).
RESTART_WINDOW_S = 0.03


def finish_in_flight(done: int, total: int, since_last_result_s: float,
                     window_s: float = RESTART_WINDOW_S) -> bool:
    """Whether a run in flight finishes when a newer request replaces it (Live mode).

    Restarting costs the work already done. Right after a result (within
    ``window_s``) the run in flight has barely begun, so the newest replaces
    it at almost no cost. Later, and always once it is half done, it finishes
    and is shown, and the newest runs right after it. So during a continuous
    drag the plots get a result at least every run plus ``window_s`` (the
    target: every 2F + 30 ms for a forward of F ms), and the last value is
    always drawn last.
    """
    if total > 0 and 2 * done >= total:
        return True
    return since_last_result_s > window_s


