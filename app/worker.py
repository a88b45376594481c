"""The one worker thread that loads models and runs forward passes.

The GUI thread never calls into a model: it hands the worker a request and
gets the answer back as a queued signal, at one place (:class:`ForwardWorker`'s
``finished`` / ``failed`` / ``loaded`` / ``observed`` signals).

Coalescing: the worker holds at most ONE pending run. A request that arrives
while another run is in flight replaces the pending one, so when a bound is
dragged faster than forwards finish only the newest setting runs; the
replaced requests are dropped and counted (``runs_dropped``). A load request
has its own slot and goes before any pending run, and drops the pending run
(it belongs to the model being replaced).

Only the worker thread touches a loaded module, so torch never sees the
same module from two threads at once.
"""

from __future__ import annotations

import itertools
import threading
import traceback
import weakref
from dataclasses import dataclass
from typing import Any

import torch
from PySide6.QtCore import QObject, QThread, Signal, Slot

from hookscope.core import (Baseline, Cancelled, HookscopeError, LoadedModel, Plan, TreeNode,
                            compare, load_model, observe, parse_input, resolve_device)
from hookscope.core.hooks import resolve_records
from hookscope.core.meaning import meaning_of
from hookscope.core.interventions import map_tensors, tensor_leaves
from hookscope.core.run import place_module, to_device


@dataclass(frozen=True)
class RunRequest:
    """One comparison to run: baseline and intervened forward of ``input_text``.

    ``observe_tree`` asks the worker to also record every module's output
    shape and call count (after a model or input change); the answer comes
    back as ``observed`` before ``finished`` (also when the comparison then fails).
    """

    request_id: int
    module: torch.nn.Module
    input_text: str
    example: Any
    plan: Plan
    device: str
    observe_tree: bool = False
    #: May stop early when a newer request arrives (Live mode): its result is
    #: stale before it exists. The answer is then ``cancelled``, not ``finished``.
    cancellable: bool = False


@dataclass(frozen=True)
class LoadRequest:
    """Load a model from a spec (a user factory may be slow, so not on the GUI thread)."""

    request_id: int
    spec: str
    weights: str | None = None
    trust_pickle: bool = False


@dataclass
class Loaded:
    """What a load produces: the model and its tree (shapes not yet known)."""

    model: LoadedModel
    tree: TreeNode


def same_values(a: Any, b: Any) -> bool:
    """Two (nested) inputs with the same tensors, value for value."""
    la, lb = tensor_leaves(a), tensor_leaves(b)
    return ([k for k, _ in la] == [k for k, _ in lb]
            and all(x.dtype == y.dtype and x.shape == y.shape and torch.equal(x, y)
                    for (_, x), (_, y) in zip(la, lb)))


def error_message(exc: BaseException) -> str:
    """The text shown to a person: the core's message, or an 'internal error' line."""
    if isinstance(exc, HookscopeError):
        return str(exc)
    return f"internal error: {type(exc).__name__}: {exc}"


class _Runner(QObject):
    """Lives in the worker thread; drains the pending slots one request at a time."""

    finished = Signal(int, object)
    failed = Signal(int, str)
    loaded = Signal(int, object)
    observed = Signal(int, object)
    started = Signal(int)
    cancelled = Signal(int)
    wake = Signal()  # emitted from the GUI thread; queued into this thread

    def __init__(self) -> None:
        super().__init__()
        self._lock = threading.Lock()
        self._pending_run: RunRequest | None = None
        self._pending_load: LoadRequest | None = None
        self._scheduled = False
        self._stopping = False
        self._stop_in_flight = False  # an explicit Cancel: the run in flight ends early
        self.runs_done = 0
        self.runs_failed = 0
        self.runs_dropped = 0
        self.loads_done = 0
        self.in_flight: int | None = None
        # The last comparison's baseline and what it was computed for: while only
        # the plan's values change (a dragged bound), the baseline is reused.
        self._baseline: tuple[tuple, Any, Baseline] | None = None
        self.wake.connect(self._drain)

    # -- called from the GUI thread --------------------------------------------
    def put(self, req: RunRequest | LoadRequest) -> list[int]:
        """Queue ``req``; returns the ids it replaced (dropped, never answered)."""
        dropped: list[int] = []
        with self._lock:
            if self._stopping:
                return [req.request_id]
            if isinstance(req, LoadRequest):
                for old in (self._pending_run, self._pending_load):
                    if old is not None:
                        dropped.append(old.request_id)
                self.runs_dropped += int(self._pending_run is not None)
                self._pending_run = None
                self._pending_load = req
            else:
                if self._pending_run is not None:
                    self.runs_dropped += 1
                    dropped.append(self._pending_run.request_id)
                self._pending_run = req
            wake = not self._scheduled
            self._scheduled = True
        if wake:
            self.wake.emit()
        return dropped

    def drop_pending(self) -> list[int]:
        """Forget what waits; returns the dropped ids."""
        with self._lock:
            dropped = [r.request_id for r in (self._pending_run, self._pending_load) if r is not None]
            self.runs_dropped += int(self._pending_run is not None)
            self._pending_run = self._pending_load = None
            return dropped

    def stop_in_flight(self) -> None:
        """Ask the run in flight to stop at its next layer (answered ``cancelled``)."""
        self._stop_in_flight = True

    def stop(self) -> None:
        with self._lock:
            self._stopping = True
        self.drop_pending()

    # -- runs in the worker thread ---------------------------------------------
    @Slot()
    def _drain(self) -> None:
        while True:
            with self._lock:
                req: RunRequest | LoadRequest | None = self._pending_load or self._pending_run
                if req is self._pending_load:
                    self._pending_load = None
                else:
                    self._pending_run = None
                if req is None or self._stopping:
                    self._scheduled = False
                    self.in_flight = None
                    return
                self.in_flight = req.request_id
                self._stop_in_flight = False
            self.started.emit(req.request_id)
            if isinstance(req, LoadRequest):
                self._load(req)
            else:
                self._run(req)

    def _load(self, req: LoadRequest) -> None:
        try:
            lm = load_model(req.spec, req.weights, trust_pickle=req.trust_pickle)
            from hookscope.core import module_tree

            tree = module_tree(lm.module)
        except BaseException as exc:  # noqa: BLE001 - every error becomes a message
            self._report_failure(req.request_id, exc)
            return
        self.loads_done += 1
        self.loaded.emit(req.request_id, Loaded(lm, tree))

    def _run(self, req: RunRequest) -> None:
        try:
            inputs = parse_input(req.input_text, req.example, meaning_of(req.module).codec)
            if req.observe_tree:
                # Observing first doubles as a warm-up, so the first comparison of a
                # model reports honest timings (no one-time set-up in the baseline).
                # A fresh tree: the GUI's own tree is never touched from here.
                dev = resolve_device(req.device)
                place_module(req.module, dev)
                tree = observe(req.module, to_device(inputs, dev))
                self.observed.emit(req.request_id, tree)
            # Keyed on the parsed input's values, not its text: a file named in the
            # input box may have been rewritten since the last run.
            key = (weakref.ref(req.module), req.device)
            baseline = None
            if self._baseline and self._baseline[0] == key and same_values(self._baseline[1], inputs):
                baseline = self._baseline[2]
            # Every run can stop at its next layer: on Cancel, on close, and (Live
            # mode) when a newer request has made it stale.
            stop = self._superseded if req.cancellable else self._stop_asked
            result = compare(req.module, inputs, req.plan, req.device, baseline=baseline,
                             should_stop=stop)
            self._baseline = ((key, map_tensors(lambda t: t.detach().clone(), inputs), result.baseline)
                              if result.baseline is not None else None)
            # The core summarises CPU-kept captures on first read; read them here,
            # so histograms are never computed on the GUI thread.
            resolve_records(result.captures)
        except Cancelled:
            with self._lock:
                self.runs_dropped += 1
            self.cancelled.emit(req.request_id)
            return
        except BaseException as exc:  # noqa: BLE001
            self.runs_failed += 1
            self._report_failure(req.request_id, exc)
            return
        self.runs_done += 1
        self.finished.emit(req.request_id, result)

    def _stop_asked(self) -> bool:
        return self._stopping or self._stop_in_flight

    def _superseded(self) -> bool:
        """A newer request waits, or a stop was asked: the run in flight is not wanted."""
        return self._stop_asked() or self._pending_run is not None or self._pending_load is not None

    def _report_failure(self, request_id: int, exc: BaseException) -> None:
        if not isinstance(exc, (HookscopeError, Exception)):
            raise exc  # KeyboardInterrupt / SystemExit are not ours to swallow
        if not isinstance(exc, HookscopeError):
            traceback.print_exception(exc)  # a bug: keep its traceback for the terminal
        self.failed.emit(request_id, error_message(exc))


class ForwardWorker(QObject):
    """GUI-side handle on the worker thread.

    Signals (always delivered on the GUI thread):
    ``finished(request_id, RunResult)``, ``failed(request_id, message)``,
    ``loaded(request_id, Loaded)``, ``observed(request_id, TreeNode)``,
    ``started(request_id)``, ``cancelled(request_id)`` (a cancellable run a newer
    request made stale).
    """

    finished = Signal(int, object)
    failed = Signal(int, str)
    loaded = Signal(int, object)
    observed = Signal(int, object)
    started = Signal(int)
    cancelled = Signal(int)

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._ids = itertools.count(1)
        self._thread = QThread()
        self._thread.setObjectName("hookscopeWorker")
        self._runner = _Runner()
        self._runner.moveToThread(self._thread)
        # Requests sent and not yet answered ON THE GUI THREAD. "Busy" is judged
        # from this, not from the worker's own state: a result the worker has
        # emitted but the GUI thread has not yet received still counts.
        self._outstanding: set[int] = set()
        # Runner signals are emitted in the worker thread; these slots belong to
        # this GUI-thread object, so every delivery is a queued call on the GUI thread.
        self._runner.finished.connect(self._deliver_finished)
        self._runner.failed.connect(self._deliver_failed)
        self._runner.loaded.connect(self._deliver_loaded)
        self._runner.observed.connect(self.observed)
        self._runner.started.connect(self.started)
        self._runner.cancelled.connect(self._deliver_cancelled)
        self._thread.start()
        self._shut = False

    # -- the one place answers arrive (GUI thread) --------------------------------
    @Slot(int, object)
    def _deliver_finished(self, rid: int, result: object) -> None:
        self._outstanding.discard(rid)
        self.finished.emit(rid, result)

    @Slot(int, str)
    def _deliver_failed(self, rid: int, message: str) -> None:
        self._outstanding.discard(rid)
        self.failed.emit(rid, message)

    @Slot(int)
    def _deliver_cancelled(self, rid: int) -> None:
        self._outstanding.discard(rid)
        self.cancelled.emit(rid)

    @Slot(int, object)
    def _deliver_loaded(self, rid: int, payload: object) -> None:
        self._outstanding.discard(rid)
        self.loaded.emit(rid, payload)

    def _submit(self, req: RunRequest | LoadRequest) -> int:
        self._outstanding.add(req.request_id)
        self._outstanding.difference_update(self._runner.put(req))
        return req.request_id

    # -- requests ----------------------------------------------------------------
    def submit_run(self, module: torch.nn.Module, input_text: str, example: Any, plan: Plan,
                   device: str, observe_tree: bool = False, cancellable: bool = False) -> int:
        """Queue a comparison; returns its request id. Replaces a pending run.

        ``cancellable``: the run may stop early once a newer request arrives
        (answered by ``cancelled`` instead of ``finished``).
        """
        return self._submit(RunRequest(next(self._ids), module, input_text, example, plan, device,
                                       observe_tree, cancellable))

    def submit_load(self, spec: str, weights: str | None = None, trust_pickle: bool = False) -> int:
        """Queue a model load; returns its request id. Drops a pending run."""
        return self._submit(LoadRequest(next(self._ids), spec, weights, trust_pickle))

    def cancel(self) -> bool:
        """Drop what is pending and stop the run in flight at its next layer
        (it is answered ``cancelled``); returns whether there was anything to stop."""
        dropped = self._runner.drop_pending()
        self._outstanding.difference_update(dropped)
        running = self._runner.in_flight is not None
        if running:
            self._runner.stop_in_flight()
        return bool(dropped) or running

    def shutdown(self, timeout_ms: int = 60_000) -> bool:
        """Drop pending work, stop the run in flight at its next layer, end the thread
        and wait for it."""
        if self._shut:
            return True
        self._shut = True
        self._runner.stop()
        self._outstanding.clear()
        for sig in (self._runner.finished, self._runner.failed, self._runner.loaded,
                    self._runner.observed, self._runner.started, self._runner.cancelled):
            try:
                sig.disconnect()
            except (RuntimeError, TypeError):
                pass
        self._thread.quit()
        ok = self._thread.wait(timeout_ms)
        return bool(ok)

    # -- state for the status bar and tests -----------------------------------
    @property
    def runs_done(self) -> int:
        return self._runner.runs_done

    @property
    def runs_failed(self) -> int:
        return self._runner.runs_failed

    @property
    def runs_dropped(self) -> int:
        return self._runner.runs_dropped

    @property
    def loads_done(self) -> int:
        return self._runner.loads_done

    @property
    def busy(self) -> bool:
        """A request is queued, running, or answered but not yet delivered here."""
        return bool(self._outstanding)

    @property
    def is_running(self) -> bool:
        return self._thread.isRunning()

    @property
    def thread(self) -> QThread:
        return self._thread
