"""The remote side of :mod:`.ray_pool`: one worker of a pool, with its own copy of the model.

:class:`PoolWorker` is a plain class; :class:`~.ray_pool.RayPool` makes it a Ray actor
(one task at a time). It loads the model once, from its spec, the way the single-run
actor does (:mod:`.ray_actor`), and then runs whatever task it is given as
``task(loaded, item, *extra)``. Answers are tuples, never remote tracebacks:
``('ok', blob)`` with the task's result pickled by :func:`~.ray_actor.dumps` (CPU
tensors as numpy arrays), or ``('failed', message, error)`` with the message a local run
would show and, for a project exception, the exception itself pickled (``None`` if it
cannot be), so the client raises the same kind of error.
"""

from __future__ import annotations

import os
import pickle
import socket
from typing import Any, Callable

from ..base.errors import HookscopeError
from ..session.runner import error_message
from .ray_actor import dumps
from ..model.sources import load_model
from ..model.class_labels import name_classes


def failure(exc: BaseException) -> tuple:
    """``('failed', message, pickled exception or None)`` for anything a call raised."""
    blob = None
    if isinstance(exc, HookscopeError):
        try:
            blob = pickle.dumps(exc)
            pickle.loads(blob)  # an exception whose constructor takes other arguments
        except Exception:  # noqa: BLE001 - then the message alone travels
            blob = None
    return ("failed", error_message(exc), blob)


class PoolWorker:
    """One pool worker (see the module docstring)."""

    def __init__(self) -> None:
        self._lm: Any = None

    def ping(self) -> dict:
        return {"host": socket.gethostname(), "pid": os.getpid()}

    def load(self, spec: str, weights: str | None, trust_pickle: bool, trust: Any,
             labels: str | None) -> tuple:
        """Load the model once: ``('loaded', description)`` or ``('failed', ...)``.

        ``trust`` is the person's :class:`~hookscope.core.model.code_trust.CodeTrust` when
        the files are the ones they said yes to (a local instance: the loader checks the
        hashes again just before it imports); ``None`` on a cluster, where the client
        checked it and ``trust_pickle`` carries the yes for a pickle.
        """
        try:
            lm = load_model(spec, weights, trust_pickle=trust_pickle, trust=trust)
            if labels:
                name_classes(lm, labels)
        except BaseException as exc:  # noqa: BLE001 - every failure is a message
            return failure(exc)
        self._lm = lm
        return ("loaded", lm.description)

    def run(self, task: Callable[..., Any], item: Any, extra: tuple) -> tuple:
        """``task(loaded, item, *extra)``, answered as the module docstring says."""
        if self._lm is None:
            return ("failed", "internal error: the pool worker holds no model", None)
        try:
            return ("ok", dumps(task(self._lm, item, *extra)))
        except BaseException as exc:  # noqa: BLE001 - whatever a task throws is a message
            return failure(exc)
