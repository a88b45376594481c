"""Command-line options for going beyond one machine, shared by ``hookscope run`` and the window.

``--device-map``/``--max-memory``/``--offload`` hand the model to accelerate
(:mod:`hookscope.core.model.dispatch`); ``--memory-budget`` bounds the captured
tensors kept (:mod:`hookscope.core.analyses.capture_budget`); ``--ray`` runs the model
in a Ray actor (:mod:`hookscope.core.remote.remote_ray`). No Qt here.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from typing import Any, TextIO

from hookscope.core import HookscopeError, LoadedModel, Plan, Session, compare
from hookscope.core.base import DeviceError, one_line
from hookscope.core.model import DEVICE_MAPS, DeviceMapOptions, device_map_options, parse_size

DEFAULT_RAY_BUDGET = "64MiB"


def add_scale_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("beyond one machine")
    g.add_argument("--device-map", choices=DEVICE_MAPS, default=None,
                   help="spread the model over the GPUs, the CPU and disk with accelerate")
    g.add_argument("--max-memory", metavar="DEV=SIZE,...", default=None,
                   help="memory each device may hold for the model, e.g. 0=20GiB,cpu=30GiB "
                        "(implies --device-map auto)")
    g.add_argument("--offload", metavar="DIR", default=None,
                   help="folder for the weights that fit nowhere else (disk offload)")
    g.add_argument("--memory-budget", metavar="SIZE", default=None,
                   help="keep captured tensors only while they fit in SIZE, else statistics "
                        "only (default with a device map: half the free memory)")
    g.add_argument("--ray", metavar="ADDRESS", default=None,
                   help="run the model in a Ray actor: local (start Ray here), auto (join the "
                        "running cluster) or ray://HOST:PORT")
    g.add_argument("--ray-budget", metavar="SIZE", default=None,
                   help=f"with --ray: most bytes of captured tensors one remote run sends back "
                        f"(default {DEFAULT_RAY_BUDGET}; statistics always come)")


@dataclass(frozen=True)
class ScaleOptions:
    dispatch: DeviceMapOptions
    memory_budget: int | None = None
    ray: str | None = None
    ray_budget: int = parse_size(DEFAULT_RAY_BUDGET)


def _size(flag: str, text: str) -> int:
    try:
        return parse_size(text)
    except HookscopeError as exc:
        raise DeviceError(f"{flag} {exc}") from exc


def scale_options(ns: argparse.Namespace) -> ScaleOptions:
    if ns.ray_budget is not None and not ns.ray:
        # refused, not ignored: a bound that silently does nothing reads as if it held
        raise DeviceError("--ray-budget bounds what a Ray actor sends back, so it needs --ray "
                          "ADDRESS; to bound the captures kept here, use --memory-budget SIZE")
    return ScaleOptions(
        device_map_options(ns.device_map, ns.max_memory, ns.offload),
        _size("--memory-budget", ns.memory_budget) if ns.memory_budget else None,
        ns.ray,
        _size("--ray-budget", ns.ray_budget or DEFAULT_RAY_BUDGET),
    )


def runner_factory_for(scale: ScaleOptions, device: str = "cpu"):
    """The runner a session (window or notebook) should use for these options:
    a Ray runner with ``--ray``, a local runner that loads through accelerate with a
    device map, or ``None`` for the plain local runner. ``factory(listener) -> runner``."""
    if scale.ray:
        from hookscope.core.remote import make_runner

        return make_runner(scale.ray, device=device, dispatch=scale.dispatch,
                           byte_budget=scale.ray_budget)
    if scale.dispatch.active:
        from hookscope.core.session import dispatching_runner

        return dispatching_runner(scale.dispatch)
    return None


def load_scaled(opts: Any, scale: ScaleOptions) -> LoadedModel:
    """The model, placed by accelerate when a device map is asked for; with ``--ray``
    a stand-in for the model loaded in a Ray actor (its example input is real)."""
    if scale.ray:
        from hookscope.core.remote import RemoteModel, RemoteModelSession

        session = RemoteModelSession(scale.ray, device=opts.device, dispatch=scale.dispatch,
                                     byte_budget=scale.ray_budget)
        try:
            lm = session.load(opts.spec, opts.weights, opts.trust_pickle)
        except BaseException:
            session.close()
            raise
        assert isinstance(lm.module, RemoteModel)  # a Ray runner's load answers with its stand-in
        lm.module.session = session  # the stand-in keeps its actor's session until the run
        return lm
    if scale.dispatch.active:
        from hookscope.core.model import load_dispatched

        return load_dispatched(opts.spec, opts.weights, scale.dispatch, opts.trust_pickle)
    return open_model(opts.spec, opts.weights, opts.trust_pickle)


def open_model(spec: str, weights: str | None, trust_pickle: bool) -> LoadedModel:
    """The model as a :class:`Session` opens it (its load request: the same loading, trust
    checks and errors as the window and a script), for a command that runs it here next;
    the session's runner ends once the model has arrived."""
    session = Session.load(spec, weights, trust_pickle=trust_pickle)
    try:
        assert session.model is not None  # Session.load raises what a failed load raised
        return session.model
    finally:
        session.close()


def compare_scaled(lm: LoadedModel, x: Any, plan: Plan, opts: Any, scale: ScaleOptions,
                   err: TextIO | None = None, views: tuple = ()):
    """One comparison, here or in the model's Ray actor (bytes moved noted on ``err``);
    there, ``views`` (analyses: the lens, a generation...) are computed after it, their
    answers in ``result.extras`` (here the caller computes them).

    With a device map or a ``--memory-budget``, statistics only (with a note) when
    the kept captures would pass the budget.
    """
    from hookscope.core.remote import RemoteModel

    err = err or sys.stderr
    if isinstance(lm.module, RemoteModel):
        session = lm.module.session
        try:
            result = session.run(lm, opts.input or "example", plan, opts.device, views)
            print(f"hookscope: note: {one_line(session.last_transfer.describe())}", file=err)
            return result
        finally:
            session.close()
    if scale.dispatch.active or scale.memory_budget is not None:
        from hookscope.core.analyses import fit_plan_to_budget

        decision = fit_plan_to_budget(lm.module, x, plan, scale.memory_budget)
        if decision.note:
            print(f"hookscope: note: {one_line(decision.note)}", file=err)
        plan = decision.plan
    return compare(lm.module, x, plan, opts.device, codec=lm.meaning.codec)
