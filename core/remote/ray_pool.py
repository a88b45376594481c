"""A pool of Ray actors, each holding its own copy of one model, running a task over items.

:class:`RayPool` starts ``size`` workers (:class:`~.pool_actor.PoolWorker`) at
``local``, ``auto`` or ``ray://HOST:PORT`` (joined as :func:`~.remote_ray.connect`
does, with its timeout), and each loads the model once from its spec. Then
:meth:`RayPool.map` runs ``task(loaded, item, *extra)`` for every item, on whichever
worker is free, and returns the results in the order of the items.

The task contract (sweep cells use it, and so can a dataset's shards):

- ``task`` is a picklable **top-level function** (Ray pickles it by reference: its module
  must be importable where the workers run, as Hookscope's own are), called in a worker as
  ``task(loaded, item, *extra)``: ``loaded`` is the worker's
  :class:`~hookscope.core.model.LoadedModel` (its ``module``, ``example_input`` and
  ``meaning``), ``item`` one of the items, ``extra`` the arguments after the items,
  sent once and shared by every call. A dataset scan's unit of work runs unchanged:
  ``finish(merge(pool.map(scan_shard, shards(n, size), request)), request, meaning)``
  (:mod:`hookscope.core.dataset`: ``scan_shard(loaded, indices, request) -> ScanPartial``).
- Items, ``extra`` and results must pickle; a result comes back with CPU tensors as
  numpy-backed tensors (:func:`~.ray_actor.dumps`), so keep results small (a partial
  statistic, a cell's number), not activations.
- A task may be run **more than once** for the same item (a worker died while running it),
  so it must not have side effects beyond its result. It must not depend on which worker
  runs it, nor on the order of the items.
- A task that raises stops the map: :class:`PoolTaskError` names the item (by
  ``names(index)``) and carries the task's own message; a project exception raised in
  the task is its cause (``__cause__``), so its kind survives the trip.
- A worker that dies (killed, out of memory, its machine gone) loses only the item it was
  running: the item is run again on another worker, at most ``max_retries`` times; after
  that, or when no worker is left, :class:`PoolError` names every item not computed. A
  map never returns with an item missing.

Model specs resolve on the workers, as for the single-run actor (see
:mod:`.remote_ray`): the folder of a ``file.py:factory`` is shipped on a cluster, and a
spec that runs code needs the person's yes (:class:`PoolModel` ``trust``/``trust_pickle``),
checked here before any worker starts.
"""

from __future__ import annotations

import pickle
import time
from collections import deque
from pathlib import Path
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from ..base.errors import HookscopeError
from ..base.extras import require
from ..model.code_trust import PICKLE, CodeTrust, check_trust
from .pool_errors import PoolError, PoolTaskError
from .remote_ray import CONNECT_TIMEOUT_S, check_address, connect, remote_spec, spec_folder
from .pool_actor import PoolWorker
from .pool_sweep import pool_sweep
from .pool_sweep_inputs import pool_sweep_inputs

#: How long the workers may take to start and load the model before the pool gives up.
START_TIMEOUT_S = 300.0


@dataclass(frozen=True)
class PoolModel:
    """The model every worker loads: a spec, as typed (``trust`` ``None``) or read from a
    file with the person's :class:`~hookscope.core.model.code_trust.CodeTrust`;
    ``trust_pickle`` is ``--trust-code``; ``labels`` a class-names file."""

    spec: str
    weights: str | None = None
    trust_pickle: bool = False
    trust: CodeTrust | None = None
    labels: str | None = None


def _describe_missing(names: list[str], limit: int = 8) -> str:
    shown = "; ".join(names[:limit])
    return shown + (f"; and {len(names) - limit} more" if len(names) > limit else "")


class RayPool:
    """``size`` Ray actors holding one model each (see the module docstring).

    ``device``: a ``cuda`` device asks Ray for a GPU per worker; ``num_cpus``: the CPUs
    Ray reserves per worker (the torch threads it gets; default one, or on a ``local``
    instance with fewer free CPUs than workers an equal share of them, so that every
    worker can start). Starting waits at most
    ``start_timeout_s`` for every worker to load the model; joining a cluster at most
    ``connect_timeout_s``. ``init_kwargs`` go to ``ray.init`` when this process starts
    or joins Ray (e.g. ``num_cpus`` of a local instance).
    """

    def __init__(self, address: str, model: PoolModel | str, size: int = 2, *,
                 device: str = "cpu", max_retries: int = 2, num_cpus: float | None = None,
                 connect_timeout_s: float = CONNECT_TIMEOUT_S,
                 start_timeout_s: float = START_TIMEOUT_S, **init_kwargs: Any) -> None:
        require("ray", "ray", "--ray")
        check_address(address)
        if size < 1:
            raise PoolError(f"a pool of {size} workers: ask for at least one (--ray-workers N)")
        if max_retries < 0:
            raise PoolError(f"max_retries={max_retries}: give 0 or more")
        self.model = PoolModel(model) if isinstance(model, str) else model
        self.address = address
        self.device = device
        self.max_retries = max_retries
        load_args = self._checked_load_args()  # the person's yes, before anything starts
        folder = spec_folder(self.model.spec) if address != "local" else None
        t0 = time.perf_counter()
        self._ray = connect(address, connect_timeout_s, working_dir=folder, **init_kwargs)
        self.connect_s = time.perf_counter() - t0
        self._workers: list[Any] = []
        self._start(size, num_cpus, load_args, start_timeout_s)
        #: seconds to join Ray, start the workers and load the model in each
        self.startup_s = time.perf_counter() - t0

    # -- starting ------------------------------------------------------------
    def _checked_load_args(self) -> tuple:
        m = self.model
        trust = m.trust if m.trust is not None else CodeTrust(typed=True, everything=m.trust_pickle)
        check_trust(m.spec, trust)  # raises CodeTrustError naming the code, nothing started
        pickles = m.trust_pickle or trust.everything or any(c.kind == PICKLE for c in trust.files)
        local = self.address == "local"
        if local:  # the very files named here (the workers' folder may be a shipped copy)
            spec, weights = _here(m.spec), m.weights
        else:
            spec, weights = remote_spec(m.spec, m.weights, local_files=False)
        # On this machine the workers read the very files said yes to, and the loader checks
        # their hashes again just before importing; on a cluster the files are Ray's copies
        # (other paths), so the yes checked here travels as the pickle flag.
        return spec, weights, pickles, (m.trust if local else None), m.labels

    def _start(self, size: int, num_cpus: float | None, load_args: tuple, timeout_s: float) -> None:
        ray = self._ray
        if num_cpus is None:
            free = float(ray.available_resources().get("CPU", 0.0)) if self.address == "local" else 0.0
            num_cpus = min(1.0, free / size) if 0 < free < size else 1.0
        options: dict[str, Any] = {"num_cpus": num_cpus, "max_concurrency": 1}
        if str(self.device).startswith("cuda"):
            options["num_gpus"] = 1
        actor_class = ray.remote(PoolWorker).options(**options)
        self._workers = [actor_class.remote() for _ in range(size)]
        refs = [w.load.remote(*load_args) for w in self._workers]
        try:
            ready, waiting = ray.wait(refs, num_returns=len(refs), timeout=timeout_s)
            if waiting:
                gpu = " and a GPU" if "num_gpus" in options else ""
                raise PoolError(f"{len(waiting)} of {size} Ray pool workers did not start within "
                                f"{timeout_s:.0f} s: each asks for {num_cpus:g} CPU(s){gpu}, which "
                                "the cluster may not have free (ray status); ask for fewer "
                                "workers (--ray-workers N)")
            for ref in refs:
                answer = ray.get(ref)
                if answer[0] == "failed":  # the load's own error, as a local load gives it
                    raise _task_error(answer, "", HookscopeError).__cause__ or HookscopeError(
                        answer[1])
        except ray.exceptions.RayError as exc:
            self.close()
            raise PoolError("Ray could not start the pool's workers: "
                            f"{str(exc).strip().splitlines()[-1]}") from exc
        except BaseException:
            self.close()
            raise

    # -- using ---------------------------------------------------------------
    @property
    def workers(self) -> list[Any]:
        """The live workers' actor handles."""
        return list(self._workers)

    @property
    def size(self) -> int:
        return len(self._workers)

    def map(self, task: Callable[..., Any], items: Sequence[Any], *extra: Any,
            names: Callable[[int], str] | None = None,
            on_result: Callable[[int, Any], None] | None = None,
            timeout_s: float | None = None) -> list[Any]:
        """``[task(loaded, item, *extra) for item in items]``, spread over the workers.

        ``names(i)`` names item ``i`` in errors (default ``item i``); ``on_result(i,
        result)`` is called here as each result arrives (any order); ``timeout_s`` bounds
        the whole map. See the module docstring for the contract and what failures raise.
        """
        items = list(items)
        if not items:
            return []
        name = names or (lambda i: f"item {i}")
        ray = self._ray
        try:
            task_ref, extra_ref = ray.put(task), ray.put(tuple(extra))  # sent once, shared
        except Exception as exc:  # noqa: BLE001 - Ray's pickling errors vary in kind
            raise PoolError(f"the task {getattr(task, '__name__', task)!r} or its arguments "
                            "cannot be sent to the workers: give a top-level function and "
                            f"picklable arguments ({type(exc).__name__}: "
                            f"{str(exc).strip().splitlines()[0] if str(exc).strip() else ''})") from exc
        results: list[Any] = [None] * len(items)
        tries = [0] * len(items)
        pending = deque(range(len(items)))
        running: dict[Any, tuple[int, Any]] = {}  # object ref -> (item, worker)
        lost: dict[int, str] = {}
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while pending or running:
            busy = {id(w) for _, w in running.values()}
            for w in [w for w in self._workers if id(w) not in busy]:
                if not pending:
                    break
                i = pending.popleft()
                running[w.run.remote(task_ref, items[i], extra_ref)] = (i, w)
            if not running:  # items left and no worker to run them
                for i in pending:
                    lost[i] = "no worker was left to run it"
                break
            wait = 1.0 if deadline is None else max(0.0, min(1.0, deadline - time.monotonic()))
            ready, _ = ray.wait(list(running), num_returns=1, timeout=wait)
            for ref in ready:
                i, worker = running.pop(ref)
                try:
                    answer = ray.get(ref)
                except ray.exceptions.RayActorError:
                    self._drop(worker)
                    tries[i] += 1
                    if tries[i] > self.max_retries:
                        lost[i] = f"its worker died {tries[i]} time(s)"
                    else:
                        pending.appendleft(i)
                    continue
                except ray.exceptions.RayError as exc:  # e.g. the task cannot be unpickled there
                    raise PoolTaskError(f"{name(i)}: {_first_line(exc)}", [name(i)]) from exc
                if answer[0] != "ok":
                    raise _task_error(answer, f"{name(i)}: ", PoolTaskError, [name(i)])
                results[i] = pickle.loads(answer[1])
                if on_result is not None:
                    on_result(i, results[i])
            if deadline is not None and time.monotonic() >= deadline and (pending or running):
                left = sorted({*pending, *(i for i, _ in running.values())})
                raise PoolError(f"the map did not finish within {timeout_s:g} s; not computed: "
                                f"{_describe_missing([name(i) for i in left])}",
                                [name(i) for i in left])
        if lost:
            missing = [name(i) for i in sorted(lost)]
            why = lost[min(lost)]
            raise PoolError(f"{len(lost)} of {len(items)} items were not computed ({why}, and "
                            f"{self.size} of the pool's workers are alive): "
                            f"{_describe_missing(missing)}", missing)
        return results

    def run_one(self, task: Callable[..., Any], item: Any, *extra: Any) -> Any:
        """``task(loaded, item, *extra)`` on one worker (with the map's retries)."""
        return self.map(task, [item], *extra)[0]

    def _drop(self, worker: Any) -> None:
        self._workers = [w for w in self._workers if w is not worker]
        try:
            self._ray.kill(worker)
        except Exception:  # noqa: BLE001 - already gone
            pass

    def sweep(self, input_text: str | None, over: Any, intervene: Any,
              metric: Any = "max-abs-diff", **options: Any) -> Any:
        """A sweep whose cells are split over the workers; see
        :func:`~.pool_sweep.pool_sweep` (equal to the local sweep, cell for cell)."""
        return pool_sweep(self, input_text, over, intervene, metric, **options)

    def sweep_inputs(self, inputs: Any, over: Any, intervene: Any,
                     metric: Any = "max-abs-diff", **options: Any) -> Any:
        """A sweep over the input set ``inputs``, its inputs in shards over the workers; see
        :func:`~.pool_sweep_inputs.pool_sweep_inputs` (equal to the local sweep)."""
        return pool_sweep_inputs(self, inputs, over, intervene, metric, **options)

    def close(self) -> None:
        """Stop every worker (Ray itself stays up: this process may use it again)."""
        workers, self._workers = self._workers, []
        for w in workers:
            try:
                self._ray.kill(w)
            except Exception:  # noqa: BLE001 - already gone, or Ray shut down
                pass

    def __enter__(self) -> "RayPool":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _here(spec: str) -> str:
    """A ``file.py:factory`` spec with the file's absolute path (others as they are)."""
    folder = spec_folder(spec)
    if folder is None:
        return spec
    target, _, fname = spec.rpartition(":")
    return f"{folder / Path(target).name}:{fname}"


def _first_line(exc: BaseException) -> str:
    cause = getattr(exc, "cause", None)
    if isinstance(cause, BaseException):
        exc = cause
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[-1] if text else ''}".rstrip(": ")


def _task_error(answer: tuple, prefix: str, kind: type[HookscopeError],
                missing: Sequence[str] | None = None) -> HookscopeError:
    """The error to raise for a ``('failed', message, blob)`` answer, its cause the task's
    own project exception where it came along."""
    _, message, blob = answer
    err = kind(prefix + message, missing) if missing is not None else kind(prefix + message)
    if blob is not None:
        try:
            err.__cause__ = pickle.loads(blob)
        except Exception:  # noqa: BLE001 - the message is enough
            pass
    return err


__all__ = ["PoolError", "PoolModel", "PoolTaskError", "RayPool", "START_TIMEOUT_S"]
