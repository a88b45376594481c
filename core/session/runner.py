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
here under the same names). :class:`QueueRunner` (:mod:`.queue_runner`) is what every runner shares: the waiting load and run,
newest wins, the thread and the interface above; a runner says only how a
load and a run are done. :class:`LocalRunner` is the in-process one:
baseline reuse while only the plan changes (keyed on the input's values),
and progress counted at the same per-layer stop points where a run may stop.
"""

from __future__ import annotations

import time
import weakref
from typing import Any

import torch

from ..base.errors import Cancelled as CancelledError
from ..base.errors import HookscopeError
from ..model.inputs import parse_input
from ..base.nested import map_tensors
from .runner_messages import (FINAL, Cancelled, Counts, Failed, Finished, Listener, Loaded,
                              LoadRequest, Observed, Progress, Request, RequestFuture, Runner,
                              RunnerEvent, RunRequest, Started, ViewFailed)
from ..model.sources import load_model
from ..model.tree import module_tree
from ..analyses.observe import observe
from ..base.devices import resolve_device
from ..engine.capture_record import resolve_records
from ..engine.run import compare, place_module, stop_points
from ..engine.forward_state import to_device


from .queue_runner import (RESTART_WINDOW_S, Job, QueueRunner, attach_display, error_message,
                           finish_in_flight, leaf_count, same_values, weights_version)
from ..model.model_kinds import prepare_loaded
from ..analyses.steer_diff import has_pending_vectors, resolve_pending


def compute_views(result: Any, views: tuple, module: torch.nn.Module, inputs: Any, plan: Any,
                  device: str, meaning: Any, stop: Any) -> None:
    """Each analysis of ``views`` on the run's model, input and plan (the lens, a generation, a
    sweep...), its answer in ``result.extras[name]``: one that fails with a project error
    answers :class:`ViewFailed` (the comparison stands); a cancel stops them all."""
    for view in views:
        try:
            result.extras[view.name] = view.compute(module, inputs, plan, device, meaning,
                                                    should_stop=stop)
        except CancelledError:
            raise
        except HookscopeError as exc:  # the comparison stands; the view says what failed
            result.extras[view.name] = ViewFailed(str(exc))


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

    def _load(self, job: Job, req: LoadRequest) -> RunnerEvent:
        if req.model is not None:  # a module built in this process: used as it is
            lm = req.model
            prepare_loaded(lm)
        else:
            lm = load_model(req.spec, req.weights, trust_pickle=req.trust_pickle, trust=req.trust)
        tree = module_tree(lm.module)
        with self._cv:
            self.counts.loads_done += 1
        return Loaded(job.rid, lm, tree)

    def _run(self, job: Job, req: RunRequest) -> RunnerEvent:
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

    def _compare(self, job: Job, req: RunRequest, module: torch.nn.Module, inputs: Any) -> RunnerEvent:
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
        compute_views(result, req.derived, module, inputs, plan, req.device, req.model.meaning, stop)
        with self._cv:
            self.counts.runs_done += 1
        return Finished(job.rid, result)

    def _tick(self, job: Job) -> bool:
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


__all__ = ["compute_views", "LoadRequest", "RunRequest", "Request", "Started", "Progress", "Loaded", "Observed",
           "Finished", "Failed", "Cancelled", "RunnerEvent", "Listener", "Counts", "Runner",
           "RequestFuture", "QueueRunner", "LocalRunner", "same_values", "error_message", "FINAL",
           "RESTART_WINDOW_S", "Job", "attach_display", "finish_in_flight", "leaf_count",
           "weights_version"]
