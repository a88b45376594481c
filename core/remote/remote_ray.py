"""The runner on a Ray actor: the model lives remotely, the window and CLI stay here.

:class:`RayRunner` implements the runner interface of :mod:`.runner`
(``submit``/``cancel``/``close``, answers to one listener, newest request
wins) with a Ray actor (:class:`~.ray_actor.ModelHost`) that loads the
model from its spec and runs :func:`~hookscope.core.engine.run.compare` there. A
front end cannot tell it from :class:`~.runner.LocalRunner`: its
:class:`~.runner.Loaded` answer carries a :class:`RemoteModel` stand-in
(the real module stays remote) with the model's tree and example input.

Only the plan, the input and the results cross the wire. The input is
pickled and ``ray.put`` once; later runs with the same values send nothing
but its id. A ``text:PROMPT`` input crosses as its text and is tokenized by
the actor (the tokenizer never leaves it); the result brings the token ids
back as ``result.inputs``, and the model's meaning comes with the load, its
tokenizer replaced by a :class:`~.text_codec.TokenTable` of token strings. Results carry statistics of every capture, the outputs, and
captured tensors only for :attr:`RayRunner.tensor_layers` (all captured
layers when ``None``) while they fit ``byte_budget``. Each run's
:class:`Transfer` (bytes sent and received, layers withheld) is kept in
:attr:`RayRunner.transfers` and set on the result as ``result.transfer``.

Specs resolve on the remote side. On a cluster (``auto``, ``ray://``) the
folder of the first ``path/to/file.py:factory`` is shipped as the Ray job's
``runtime_env`` ``working_dir`` (every file in it, as Ray packs it; Ray
takes one per job, so later model files must be in the same folder);
``--weights`` inside that folder travel with it, any other path must exist
on the cluster. With ``local`` the actor is on this machine and reads the
files where they are. ``demo:`` specs and importable
``package.module:factory`` specs need Hookscope (and the package) installed
where the actor runs.
"""

from __future__ import annotations

import itertools
import logging
import pickle
import socket
import threading
import time
from concurrent.futures import CancelledError as FutureCancelled
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from ..model.code_trust import PICKLE, check_trust
from ..base.errors import HookscopeError
from ..base.extras import require
from ..base.user_text import is_digits
from ..model.inputs import parse_input
from ..session.runner import (Cancelled, Failed, Finished, Listener, Loaded, LoadRequest, Observed,
                              Progress, QueueRunner, RequestFuture, RunnerEvent, RunRequest, Job,
                              ViewFailed, same_values)
from .ray_actor import ModelHost, TextInput, dumps, is_text_input
from ..model.loaded_model import LoadedModel
from ..model.sae import StandIn

#: Bytes of captured tensors one run may send back unless told otherwise.
DEFAULT_BYTE_BUDGET = 64 << 20
#: How long an address may take to answer before it counts as not there.
CONNECT_TIMEOUT_S = 5.0

_init_lock = threading.Lock()
_joined: str | None = None  # the address this process joined Ray at (None: not by us)
_shipped: Path | None = None  # the local folder sent as the Ray job's working_dir


class RemoteError(HookscopeError):
    """Ray cannot be reached, or the actor holding the model is gone."""


@dataclass(frozen=True)
class Transfer:
    """Bytes one request moved: ``sent`` (input, when new, and plan), ``received``
    (the pickled answer), and the layers whose tensors stayed remote (over budget)."""

    request_id: int
    sent: int
    received: int
    tensor_bytes: int = 0
    withheld: tuple[str, ...] = ()

    @property
    def total(self) -> int:
        return self.sent + self.received

    def describe(self) -> str:
        held = (f"; tensors of {len(self.withheld)} layer(s) stayed remote (over the budget)"
                if self.withheld else "")
        return (f"ray: moved {self.total} bytes ({self.sent} sent, {self.received} received, "
                f"{self.tensor_bytes} of them captured tensors){held}")


class RemoteModel(StandIn):
    """Stands for a model that lives in a Ray actor; it cannot be called here. The SAEs
    attached to its layers (``saes``) go to the actor with each run."""

    def __init__(self, host_key: str, serial: int) -> None:
        super().__init__()
        self.host_key = host_key
        self.serial = serial
        self.session: Any = None  # a RemoteModelSession that drives it, where one does

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        raise HookscopeError("this model lives in a Ray actor: run it through its runner "
                             "(hookscope --ray ...), not here")


def connect(address: str, timeout_s: float = CONNECT_TIMEOUT_S, working_dir: str | Path | None = None,
            **init_kwargs: Any):
    """Join (or start, for ``local``) Ray at ``address``; returns the ``ray`` module.

    ``working_dir``: a local folder Ray ships to every worker of this job (its
    ``runtime_env``); a ``file.py:factory`` in it loads from that copy on the
    cluster. Ray takes one per job, so it is set by the first connect.
    ``init_kwargs`` go to ``ray.init`` (e.g. ``num_cpus``). Raises
    :class:`RemoteError` within about ``timeout_s`` when nothing answers.
    """
    ray = require("ray", "ray", "--ray")
    check_address(address)
    global _joined, _shipped
    with _init_lock:
        if ray.is_initialized():
            if _joined is not None and _joined != address:
                raise RemoteError(f"this process has joined Ray at {_joined} already; one "
                                  f"address per process: restart to use {address}")
            return ray
        _joined = _shipped = None  # Ray was shut down: nothing of an earlier join holds
        if address.startswith("ray://"):
            _probe(address, timeout_s)
        # Ray's own start-up notes (signal handlers, tokens) are not the user's business here.
        kwargs: dict[str, Any] = {"ignore_reinit_error": True, "log_to_driver": False,
                                  "logging_level": logging.ERROR, **init_kwargs}
        if address == "local":
            kwargs.setdefault("include_dashboard", False)
        else:
            kwargs["address"] = address
        if working_dir is not None:
            kwargs["runtime_env"] = {"working_dir": str(working_dir)}
        outcome: list[BaseException | None] = []
        ready = threading.Event()

        def keeper() -> None:
            try:
                ray.init(**kwargs)
                outcome.append(None)
            except BaseException as exc:  # noqa: BLE001 - reported below, with what to do
                outcome.append(exc)
            ready.set()
            if outcome[0] is None:
                # Ray ties the processes it starts to the thread that started them
                # (PR_SET_PDEATHSIG): this thread must live as long as the process.
                threading.Event().wait()

        threading.Thread(target=keeper, daemon=True, name="hookscope-ray-keeper").start()
        # Starting a local instance takes a while on a small machine; joining must not hang.
        ready.wait(None if address == "local" else timeout_s)
        if not outcome:
            raise RemoteError(f"Ray at {address} did not answer within {timeout_s:.0f} s: check "
                              "that the cluster is up (ray status), or use --ray local")
        if outcome[0] is not None:
            exc = outcome[0]
            first = (str(exc).strip().splitlines()[0].rstrip(".") if str(exc).strip()
                     else type(exc).__name__)
            hint = (" Start one with 'ray start --head', or use --ray local."
                    if address == "auto" else "")
            raise RemoteError(f"cannot join Ray at {address}: {first}.{hint}") from exc
        _joined = address
        _shipped = Path(working_dir).resolve() if working_dir is not None else None
    return ray


def check_address(address: str) -> None:
    """Raise :class:`RemoteError` for an address that is none of the three forms."""
    if address not in ("local", "auto") and not address.startswith("ray://"):
        raise RemoteError(f"--ray {address!r}: use local (start Ray here), auto (join the "
                          "running cluster) or ray://HOST:PORT (a cluster's client server)")


def _probe(address: str, timeout_s: float) -> None:
    hostport = address.removeprefix("ray://").rstrip("/")
    host, _, port = hostport.rpartition(":")
    if not host or not is_digits(port):
        raise RemoteError(f"--ray {address!r}: write ray://HOST:PORT, e.g. ray://head-node:10001")
    try:
        socket.create_connection((host, int(port)), timeout=min(timeout_s, 3.0)).close()
    except OSError as exc:
        raise RemoteError(f"no Ray client server answers at {hostport} ({exc.strerror or exc}): "
                          "start the cluster ('ray start --head' serves ray:// on port 10001), "
                          "check the host and port, or use --ray local") from exc


def spec_folder(spec: str) -> Path | None:
    """The folder of a ``path/to/file.py:factory`` spec (``None`` for other specs)."""
    target, sep, _ = spec.rpartition(":")
    if not sep or not target.endswith(".py"):
        return None
    path = Path(target).expanduser().resolve()
    if not path.is_file():
        raise HookscopeError(f"model file {target!r} does not exist here, so it cannot be sent "
                             "to the Ray actor")
    return path.parent


def remote_spec(spec: str, weights: str | None, local_files: bool) -> tuple[str, str | None]:
    """The spec and weights as the actor must name them.

    A file in the shipped folder (the job's working_dir) is named relative to
    it, so the actor loads Ray's copy; with ``local_files`` (a Ray instance on
    this machine) other paths are used as they are; on a cluster they must
    exist there (the message says how to ship them).
    """
    folder = spec_folder(spec)
    if folder is None:
        return spec, weights
    target, _, fname = spec.rpartition(":")
    if _shipped is not None and folder == _shipped:
        w = Path(weights).expanduser().resolve() if weights else None
        rel_w = str(w.relative_to(folder)) if w is not None and w.is_relative_to(folder) else weights
        return f"{Path(target).name}:{fname}", rel_w
    if local_files:
        return f"{Path(target).expanduser().resolve()}:{fname}", weights
    raise RemoteError(f"{Path(target).name} is not in the folder shipped to the Ray cluster "
                      f"({_shipped or 'none'}): Ray ships one folder per process, the first model "
                      "file's; restart hookscope to open a model from another folder")


class RayRunner(QueueRunner):
    """The runner interface over a Ray actor (see the module docstring).

    ``address``: ``local``, ``auto`` or ``ray://HOST:PORT``; Ray is joined on
    the runner's thread at the first request, whose answer carries any
    connection error. ``device``: a ``cuda`` device asks Ray for a GPU for
    the actor. ``dispatch``: device-map options applied when the actor loads.
    """

    def __init__(self, listener: Listener | None = None, address: str = "local", *,
                 device: str = "cpu", byte_budget: int = DEFAULT_BYTE_BUDGET,
                 tensor_layers: list[str] | None = None, dispatch: Any = None,
                 progress_every_s: float = 0.1, connect_timeout_s: float = CONNECT_TIMEOUT_S) -> None:
        require("ray", "ray", "--ray")  # fail at once, not at the first request
        super().__init__(listener, progress_every_s, "hookscope-ray-runner")
        self.address = address
        self.device = device
        self.byte_budget = byte_budget
        self.tensor_layers = tensor_layers
        self.dispatch = dispatch
        self._connect_timeout = connect_timeout_s
        self.transfers: dict[int, Transfer] = {}
        self.last_transfer: Transfer | None = None
        self._ray: Any = None
        self._actor: Any = None
        self._host_key = ""
        self._serial = 0
        self._input: tuple[int, Any, int] | None = None  # (id, values, blob size) the actor holds
        self._input_ids = itertools.count(1)

    # -- the queue's hooks (the caller's thread) ------------------------------
    def _stopping(self, job: Job) -> None:
        if isinstance(job.request, RunRequest):
            self._tell_cancel(job.rid, wait_s=2.0)

    def _tell_cancel(self, rid: int, wait_s: float = 0.0) -> None:
        """Set the actor's cancel flag for ``rid`` now (answered by a second actor thread
        while the run is busy); with ``wait_s``, wait that long for it to be set."""
        actor, ray = self._actor, self._ray
        if actor is None or ray is None:
            return
        try:
            ref = actor.cancel.remote(rid)
            if wait_s:
                ray.get(ref, timeout=wait_s)
        except Exception:  # noqa: BLE001 - a dead actor is reported by the run itself
            pass

    def _closed(self) -> None:
        self._kill_actor()

    @property
    def actor(self) -> Any:
        """The Ray actor handle holding the model (``None`` before the first load)."""
        return self._actor

    # -- the thread ----------------------------------------------------------
    def _ensure_actor(self, spec: str) -> Any:
        folder = spec_folder(spec) if self.address != "local" else None
        ray = self._ray = connect(self.address, self._connect_timeout, working_dir=folder)
        if self._actor is not None:
            return self._actor
        options: dict[str, Any] = {"max_concurrency": 3}
        if str(self.device).startswith("cuda"):
            options["num_gpus"] = 1
        self._actor = ray.remote(ModelHost).options(**options).remote()
        self._host_key = f"{id(self)}:{next(self._input_ids)}"
        self._input = None
        return self._actor

    def _kill_actor(self) -> None:
        actor, self._actor = self._actor, None
        if actor is not None and self._ray is not None:
            try:
                self._ray.kill(actor)
            except Exception:  # noqa: BLE001 - already gone, or Ray shut down
                pass

    def _call(self, job: Job, ref: Any) -> Any:
        """Wait for ``ref``, passing a cancel to the actor and relaying its progress."""
        ray = self._ray
        cancel_sent = False
        t0 = time.perf_counter()
        last = None
        while True:
            try:
                ready, _ = ray.wait([ref], timeout=self._progress_every)
                if ready:
                    return ray.get(ref)
                if job.stop and not cancel_sent:
                    self._tell_cancel(job.rid)
                    cancel_sent = True
                if isinstance(job.request, RunRequest):
                    rid, done, total, _ = ray.get(self._actor.progress.remote(), timeout=10)
                    if rid == job.rid and (done, total) != last:
                        last = (done, total)
                        self._emit(Progress(job.rid, done, total, time.perf_counter() - t0))
            except ray.exceptions.RayActorError as exc:
                self._actor = None
                raise RemoteError("the Ray actor that held the model died "
                                  f"({str(exc).strip().splitlines()[0]}); open the model again "
                                  "to start a new one") from exc
            except ray.exceptions.GetTimeoutError as exc:
                raise RemoteError("the Ray actor stopped answering; open the model again") from exc

    def _load(self, job: Job, req: LoadRequest) -> list[RunnerEvent]:
        if req.model is not None:
            raise RemoteError("a model built in this Python session stays in this process: "
                              "explore it with the local runner, or give Ray a spec it can "
                              "load (file.py:factory)")
        if req.trust is not None:  # a spec read from a file: the person's yes, checked here,
            check_trust(req.spec, req.trust)  # on their machine (this runner's thread)
        actor = self._ensure_actor(req.spec)
        spec, weights = remote_spec(req.spec, req.weights, local_files=self.address == "local")
        try:
            # the person's yes was checked above, before anything was sent: the actor gets
            # it as the pickle flag
            trusted = req.trust_pickle or (req.trust is not None and (
                req.trust.everything or any(c.kind == PICKLE for c in req.trust.files)))
            answer = self._call(job, actor.load.remote(job.rid, spec, weights, trusted,
                                                       self.dispatch))
        except RemoteError:
            self._actor = None
            raise
        except self._ray.exceptions.RayError as exc:  # e.g. the runtime_env could not be set up
            self._kill_actor()
            raise RemoteError(f"Ray could not start the model's actor: "
                              f"{str(exc).strip().splitlines()[-1]}") from exc
        if answer[0] == "failed":
            return [Failed(job.rid, answer[1])]
        _, serial, blob = answer
        example, kind, description, tree, meaning = pickle.loads(blob)
        self._serial = serial
        self.transfers[job.rid] = self.last_transfer = Transfer(job.rid, 0, len(blob))
        stand_in = RemoteModel(self._host_key, serial)
        lm = LoadedModel(stand_in, example, req.spec, kind,
                         f"{description} (on Ray at {self.address})", req.weights, meaning)
        with self._cv:
            self.counts.loads_done += 1
        return [Loaded(job.rid, lm, tree)]

    def _sendable(self, views: tuple) -> tuple[tuple, dict[str, ViewFailed]]:
        """The analyses that can go to the actor, and a :class:`ViewFailed` answer for each one
        that cannot (one holding a window's callback): the comparison runs all the same."""
        refused = {v.name: ViewFailed(why) for v in views
                   if (why := _cannot_travel(v, self._ray)) is not None}
        return tuple(v for v in views if v.name not in refused), refused

    def _run(self, job: Job, req: RunRequest) -> list[RunnerEvent]:
        stand_in = req.model.module
        if (not isinstance(stand_in, RemoteModel) or stand_in.host_key != self._host_key
                or stand_in.serial != self._serial or self._actor is None):
            raise RemoteError("the model's Ray actor is gone or holds another model: open the "
                              "model again")
        inputs: Any
        if is_text_input(req.input_text):  # the tokenizer is in the actor: send the prompt
            inputs = TextInput(req.input_text.lstrip())
            same = (self._input is not None and isinstance(self._input[1], TextInput)
                    and self._input[1] == inputs)
        else:
            inputs = parse_input(req.input_text, req.model.example_input, req.model.meaning.codec)
            same = (self._input is not None and not isinstance(self._input[1], TextInput)
                    and same_values(self._input[1], inputs))
        if same:
            assert self._input is not None
            input_id, blob, ref = self._input[0], None, None
        else:
            blob = dumps(inputs)
            input_id = next(self._input_ids)
            ref = self._ray.put(blob)
        plan_bytes = len(pickle.dumps(req.plan))
        derived, refused = self._sendable(req.derived)
        answer = self._call(job, self._actor.run.remote(
            job.rid, self._serial, input_id, ref, req.plan, req.device, req.observe_tree,
            req.train, self.tensor_layers, self.byte_budget, derived, dict(stand_in.saes)))
        if blob is not None:
            self._input = (input_id, inputs, len(blob))
        sent = plan_bytes + (len(blob) if blob is not None else 0)
        if answer[0] == "cancelled":
            with self._cv:
                self.counts.dropped += 1
            return [Cancelled(job.rid)]
        if answer[0] == "failed":
            if isinstance(inputs, TextInput):  # a prompt the actor could not tokenize is not held
                self._input = None
            with self._cv:
                self.counts.runs_failed += 1
            self.transfers[job.rid] = self.last_transfer = Transfer(job.rid, sent, 0)
            return [Failed(job.rid, answer[1])]
        tree, result, withheld, tensor_bytes = pickle.loads(answer[1])
        transfer = Transfer(job.rid, sent, len(answer[1]), tensor_bytes, tuple(withheld))
        self.transfers[job.rid] = self.last_transfer = transfer
        result.transfer = transfer
        result.extras.update(refused)
        with self._cv:
            self.counts.runs_done += 1
        events: list[RunnerEvent] = [Observed(job.rid, tree)] if tree is not None else []
        return events + [Finished(job.rid, result)]


def _cannot_travel(view: Any, ray: Any) -> str | None:
    """Why the analysis ``view`` cannot be sent to the actor (``None``: it can)."""
    try:
        ray.cloudpickle.dumps(view)
    except Exception as exc:  # noqa: BLE001 - whatever pickling raises is the reason
        return f"{view.name} cannot be sent to the Ray actor ({type(exc).__name__}: {exc})"
    return None


def make_runner(address: str, **options: Any) -> Callable[[Listener], RayRunner]:
    """A runner factory for :class:`~hookscope.core.session.session.Session` (``runner_factory=``)
    or the window's worker: ``make_runner("local")(listener)`` is a :class:`RayRunner`.

    Checks at once that Ray is installed and the address is well formed; the
    connection itself is made on the runner's thread (its errors are answers).
    """
    require("ray", "ray", "--ray")
    check_address(address)
    return lambda listener: RayRunner(listener, address, **options)


class RemoteModelSession:
    """A :class:`RayRunner` driven step by step, waiting for each answer (scripts, the CLI).

    ``load`` returns the stand-in :class:`~hookscope.core.LoadedModel`;
    ``run`` one comparison on it. Failures raise :class:`HookscopeError` with
    the message a local run would give, or a :class:`RemoteError`.
    """

    def __init__(self, address: str, *, device: str = "cpu", dispatch: Any = None,
                 byte_budget: int = DEFAULT_BYTE_BUDGET, timeout_s: float | None = None) -> None:
        self._timeout = timeout_s
        self.runner = RayRunner(None, address, device=device, byte_budget=byte_budget,
                                dispatch=dispatch)

    def _wait(self, future: RequestFuture) -> RunnerEvent:
        """The request's final answer; its error raised (see :class:`RequestFuture`)."""
        try:
            return future.result(self._timeout)
        except FutureTimeout:
            raise RemoteError(f"no answer from Ray within {self._timeout} s") from None
        except FutureCancelled:
            raise RemoteError("the remote run was cancelled") from None

    def load(self, spec: str, weights: str | None = None, trust_pickle: bool = False) -> LoadedModel:
        ev = self._wait(self.runner.submit(LoadRequest(spec, weights, trust_pickle)))
        assert isinstance(ev, Loaded)
        return ev.model

    def run(self, model: LoadedModel, input_text: str, plan: Any, device: str = "cpu",
            derived: tuple = ()):
        """One comparison; ``derived``: analyses computed after it in the actor (the logit
        lens, a generation, attention, SAE features), answered in ``result.extras``."""
        ev = self._wait(self.runner.submit(RunRequest(model, input_text or "example", plan, device,
                                                      derived=tuple(derived))))
        assert isinstance(ev, Finished)
        return ev.result

    @property
    def last_transfer(self) -> Transfer | None:
        return self.runner.last_transfer

    def close(self) -> None:
        self.runner.close()


def remote_compare(address: str, spec: str, weights: str | None, input_text: str, plan: Any,
                   device: str = "cpu", *, trust_pickle: bool = False, dispatch: Any = None,
                   byte_budget: int = DEFAULT_BYTE_BUDGET, timeout_s: float | None = None):
    """Load ``spec`` in a Ray actor, run one comparison there; ``(RunResult, Transfer)``."""
    session = RemoteModelSession(address, device=device, dispatch=dispatch,
                                 byte_budget=byte_budget, timeout_s=timeout_s)
    try:
        model = session.load(spec, weights, trust_pickle)
        return session.run(model, input_text, plan, device), session.last_transfer
    finally:
        session.close()


__all__ = ["RayRunner", "RemoteModel", "RemoteError", "Transfer", "check_address", "connect", "make_runner",
           "remote_compare", "RemoteModelSession", "remote_spec", "spec_folder", "DEFAULT_BYTE_BUDGET"]
