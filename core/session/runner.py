"""The runner: where models are loaded and forwards run, one request at a time.

Nothing here imports Qt. The window, the CLI and a notebook hand requests to
a runner and get answers back as :data:`RunnerEvent` objects passed to one
``listener`` callable. The listener is called in the runner's own thread; a
front end that needs the answer on another thread (the window's GUI thread)
relays it from there (``hookscope.app.worker``).

The runner interface (stable; a remote runner, e.g. a Ray actor, implements it)
------------------------------------------------------------------------------
``runner = SomeRunner(listener)``
    ``listener(event)`` receives every answer, in the runner's thread.
``runner.submit(request) -> RequestFuture``
    Queue a :class:`LoadRequest` or :class:`RunRequest`; returns its
    :class:`RequestFuture` (``future.request_id``: the id its answers carry;
    ids only grow). The newest request wins: a run request replaces the
    run waiting to start, and the run in flight stops at its next layer
    (answered :class:`Cancelled`) unless it is worth finishing (half done, or
    the last result is more than 30 ms old: :func:`finish_in_flight`),
    then it is answered :class:`Finished` and the newest runs next; a load
    request stops the run in flight and drops the waiting run,
    which belongs to the model it replaces. A replaced request is answered by
    nothing at all (``counts.dropped`` counts the replaced runs); its future,
    like that of every request stopped before its answer, is cancelled.
``runner.cancel() -> bool``
    Drop what waits and stop the run in flight at its next layer; whether
    there was anything to stop. ``future.cancel()`` does the same for one request.
``runner.close(timeout_s=1.0) -> bool``
    Stop taking requests, stop the run in flight at its next layer, detach the
    listener (nothing is answered after close) and wait at most ``timeout_s``
    for the thread; whether it ended in time. Never raises; idempotent. A
    forward stuck inside one layer cannot be interrupted: the thread is a
    daemon, so it never keeps the process alive or aborts it.
``runner.counts`` (:class:`Counts`), ``runner.in_flight`` (request id or ``None``).

Answers, for each request that is not replaced: :class:`Started`, then any
number of :class:`Progress`, then exactly one of :class:`Loaded`,
:class:`Finished`, :class:`Failed`, :class:`Cancelled`. A run request with
``observe_tree`` sends :class:`Observed` (the layers' output shapes) before
its final answer. Whatever a model throws, ``KeyboardInterrupt``,
``SystemExit`` and other ``BaseException`` included, comes back as
:class:`Failed` with a message, and the runner takes the next request.

A run request names its model by the :class:`~hookscope.core.LoadedModel`
its runner's :class:`Loaded` answer carried; a remote runner may answer with
a stand-in whose module lives on the remote side.

The requests and answers themselves are in :mod:`.runner_messages` (imported
here under the same names). :class:`QueueRunner` is what every runner shares: the waiting load and run,
newest wins, the thread and the interface above; a runner says only how a
load and a run are done. :class:`LocalRunner` is the in-process one:
baseline reuse while only the plan changes (keyed on the input's values),
and progress counted at the same per-layer stop points where a run may stop.
"""

from __future__ import annotations

import itertools
import threading
import time
import traceback
import weakref
from concurrent.futures import InvalidStateError
from typing import Any

import torch

from ..base.errors import Cancelled as CancelledError
from ..base.errors import ForwardError, HookscopeError
from ..model.inputs import parse_input
from ..base.nested import map_tensors, tensor_leaves
from .runner_messages import (FINAL, Cancelled, Counts, Failed, Finished, Listener, Loaded,
                              LoadRequest, Observed, Progress, Request, RequestFuture, Runner,
                              RunnerEvent, RunRequest, Started, ViewFailed)
from ..model.sources import load_model
from ..model.tree import module_tree
from ..capture.observe import observe
from ..base.user_text import safe_str
from ..base.devices import resolve_device
from ..capture.capture_record import resolve_records
from ..capture.run import compare, place_module, stop_points
from ..capture.forward_state import to_device
from ..capture.record_stats import reference_of
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


class _Job:
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
        self._pending_run: _Job | None = None
        self._pending_load: _Job | None = None
        self._current: _Job | None = None
        self._closing = False
        self.counts = Counts()
        # When the last run finished: whether a run in flight is worth finishing
        # when a newer one arrives (see finish_in_flight).
        self._last_result_t: float | None = None
        # The thread waits for the first submit, which cannot come before the
        # subclass's constructor returns: its own state may be set after this.
        self._thread = threading.Thread(target=self._loop, name=thread_name, daemon=True)
        self._thread.start()

    # -- the interface (any thread) ---------------------------------------------
    def submit(self, request: Request) -> RequestFuture:
        job = _Job(next(self._ids), request)
        replaced: list[_Job] = []  # requests that end here without an answer
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

    def _forget(self, job: _Job) -> None:
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

    def _keeps_running(self, current: "_Job", request: Request) -> bool:
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
    def _load(self, job: _Job, req: LoadRequest) -> RunnerEvent | list[RunnerEvent]:
        """Do a load (in the runner's thread); its final answer, or answers ending with it."""
        raise NotImplementedError

    def _run(self, job: _Job, req: RunRequest) -> RunnerEvent | list[RunnerEvent]:
        """Do a run (in the runner's thread); its final answer, or answers ending with it."""
        raise NotImplementedError

    def _stopping(self, job: _Job) -> None:
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
                self._do(job)
            finally:
                with self._cv:
                    self._current = None

    def _do(self, job: _Job) -> None:
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


def _cancel_futures(jobs: list[_Job]) -> None:
    """The futures of requests that end without an answer (outside the runner's lock:
    a future's callbacks run here)."""
    for job in jobs:
        job.settled = True
        job.future.cancel()


def _settle(job: _Job, final: RunnerEvent) -> None:
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
                                                    req.input_text, req.model.example_input)
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


class LocalRunner(QueueRunner):
    """The in-process runner: one daemon thread, newest request wins.

    ``progress_every_s``: the least time between two :class:`Progress`
    answers of one request (0: one per layer call, for tests).
    """

    def __init__(self, listener: Listener | None = None, progress_every_s: float = 0.1) -> None:
        super().__init__(listener, progress_every_s, "hookscope-runner")
        # The last comparison's baseline and what it was computed for: while only
        # the plan's values change (a dragged bound), the baseline is reused.
        self._baseline: tuple[tuple, Any, Any] | None = None
        # Leaf-module calls of one forward, per module, learned by its observe pass.
        self._calls: "weakref.WeakKeyDictionary[torch.nn.Module, int]" = weakref.WeakKeyDictionary()
        # Per module: steering vectors computed from diff: specs, by (layer, spec).
        self._vectors: "weakref.WeakKeyDictionary[torch.nn.Module, dict]" = weakref.WeakKeyDictionary()

    def _load(self, job: _Job, req: LoadRequest) -> RunnerEvent:
        if req.model is not None:  # a module built in this process: used as it is
            from ..model.model_kinds import prepare_loaded

            lm = req.model
            prepare_loaded(lm)
        else:
            lm = load_model(req.spec, req.weights, trust_pickle=req.trust_pickle, trust=req.trust)
        tree = module_tree(lm.module)
        with self._cv:
            self.counts.loads_done += 1
        return Loaded(job.rid, lm, tree)

    def _run(self, job: _Job, req: RunRequest) -> RunnerEvent:
        module = req.model.module
        inputs = parse_input(req.input_text, req.model.example_input, req.model.meaning.codec)
        was_training = module.training
        if module.training != req.train:
            module.train(req.train)
        try:
            return self._compare(job, req, module, inputs)
        finally:
            if req.model.kind == "live" and module.training != was_training:
                module.train(was_training)  # the caller's module: its mode as they left it

    def _compare(self, job: _Job, req: RunRequest, module: torch.nn.Module, inputs: Any) -> RunnerEvent:
        from ..capture.steer_diff import has_pending_vectors, resolve_pending

        live = req.model.kind == "live"  # a caller's module may be trained between runs
        key = (weakref.ref(module), req.device, weights_version(module) if live else None)
        baseline = None
        if self._baseline and self._baseline[0] == key and same_values(self._baseline[1], inputs):
            baseline = self._baseline[2]
        per_pass = self._calls.get(module) or leaf_count(module)
        job.total = per_pass * (int(req.observe_tree) + int(baseline is None) + 1)
        stop = lambda: self._tick(job)  # noqa: E731 - a stop point is a progress point too
        if req.observe_tree:
            # Observing first doubles as a warm-up, so the first comparison of a
            # model reports honest timings (no one-time set-up in the baseline).
            dev = resolve_device(req.device)
            place_module(module, dev)
            before = job.done
            with stop_points(module, stop):
                tree = observe(module, to_device(inputs, dev))
            self._calls[module] = max(1, job.done - before)
            job.total = job.done + self._calls[module] * (int(baseline is None) + 1)
            self._emit(Observed(job.rid, tree))
        plan = req.plan
        if has_pending_vectors(plan):  # diff: vectors, computed here once per layer and spec
            dev = resolve_device(req.device)
            place_module(module, dev)
            plan = resolve_pending(plan, module, req.model.example_input, req.model.meaning.codec,
                                   self._vectors.setdefault(module, {}), dev)
        result = compare(module, inputs, plan, req.device, baseline=baseline, should_stop=stop,
                         codec=req.model.meaning.codec)
        self._baseline = ((key, map_tensors(lambda t: t.detach().clone(), inputs), result.baseline)
                          if result.baseline is not None else None)
        # The core summarises CPU-kept captures on first read; read them here,
        # so histograms are never computed on the GUI thread.
        resolve_records(result.captures)
        result.meaning = req.model.meaning  # what the output means, for a notebook's display
        if result.inputs is None:
            result.inputs = inputs
        for view in req.derived:  # the lens, a generation: same model, input and plan
            try:
                result.extras[view.name] = view.compute(module, inputs, plan, req.device,
                                                        req.model.meaning, should_stop=stop)
            except CancelledError:
                raise
            except HookscopeError as exc:  # the comparison stands; the view says what failed
                result.extras[view.name] = ViewFailed(str(exc))
        with self._cv:
            self.counts.runs_done += 1
        return Finished(job.rid, result)

    def _tick(self, job: _Job) -> bool:
        """A stop point: count one layer call, report progress now and then, and
        say whether the request should stop here."""
        job.done += 1
        if job.done > job.total:
            job.total = job.done
        now = time.perf_counter()
        if now - job.last_progress >= self._progress_every:
            job.last_progress = now
            self._emit(Progress(job.rid, job.done, job.total, now - job.t0))
        return job.stop or self._closing


__all__ = ["LoadRequest", "RunRequest", "Request", "Started", "Progress", "Loaded", "Observed",
           "Finished", "Failed", "Cancelled", "RunnerEvent", "Listener", "Counts", "Runner",
           "RequestFuture", "QueueRunner", "LocalRunner", "same_values", "error_message", "FINAL"]
