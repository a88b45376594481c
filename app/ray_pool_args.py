"""The ``--ray ADDRESS`` / ``--ray-workers N`` options of ``hookscope scan`` and
``hookscope sweep``: checked alike, and the pool of Ray actors they ask for opened
alike (the model is loaded in the actors only, from its spec)."""

from __future__ import annotations

import argparse
from typing import Any

from hookscope.core import PlanError

#: Actors in a pool when ``--ray-workers`` is not given.
DEFAULT_WORKERS = 2


def check_ray_options(ns: argparse.Namespace) -> None:
    """Refuse ``--ray-workers`` without ``--ray`` (it sizes a pool that would not exist)."""
    if ns.ray_workers is not None and not ns.ray:
        raise PlanError("--ray-workers sizes the pool of Ray actors, so it needs --ray ADDRESS")


def open_ray_pool(ns: argparse.Namespace) -> Any:
    """The :class:`~hookscope.core.remote.RayPool` at ``--ray`` of ``--ray-workers`` actors,
    each loading ``ns.spec`` (weights, trust, labels as given); use it as a context."""
    from hookscope.core.remote import PoolModel, RayPool

    workers = DEFAULT_WORKERS if ns.ray_workers is None else ns.ray_workers
    if workers < 1:
        raise PlanError(f"--ray-workers {workers}: give at least one worker")
    model = PoolModel(ns.spec, ns.weights, ns.trust_code, labels=ns.labels)
    return RayPool(ns.ray, model, workers, device=ns.device)
