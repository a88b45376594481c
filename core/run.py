"""Running a model: one forward with a plan, or a baseline/intervened comparison.

:func:`run` does one forward with the plan's hooks attached and always takes
them off again. :func:`compare` does a baseline forward (no hooks) and an
intervened one, and reports both outputs and their difference.

Why the intervened forward runs under ``no_grad`` when tensors are captured:
inference-mode tensors have no version counter, and the version counter is
how a capture that a later in-place op overwrote is found without cloning
every capture. Forwards that keep no tensors (baseline, clamp-only,
statistics-only) run under ``inference_mode``. The kernels are the same, so
the numbers are too.
"""

from __future__ import annotations

import contextlib
import itertools
import time
import weakref
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
import torch
from torch import nn

from .devices import resolve_device, synchronize
from .errors import Cancelled, ForwardError, HookscopeError
from .forward_state import (AUTOGRAD_MESSAGE, grad_mode_for, mark_needs_grad, needs_autograd,
                            restore, snapshot)
from .hooks import CaptureRecord, HookSession, resolve_records
from .call_args import CallArgs
from .interventions import map_tensors, tensor_leaves
from .plan import LayerPlan, Plan

# Per model: layers whose captured output a later in-place op overwrote.
# Learned once (costing one extra forward), then those layers are copied at
# capture time on every later run, e.g. each step of a Live drag.
_INPLACE_VICTIMS: "weakref.WeakKeyDictionary[nn.Module, set[str]]" = weakref.WeakKeyDictionary()


class _Captures:
    """What every result with ``captures`` offers."""

    captures: dict[str, list[CaptureRecord]]

    @property
    def captured_bytes(self) -> int:
        """Bytes held by the kept tensors (after and before interventions)."""
        return sum(r.nbytes for recs in self.captures.values() for r in recs)

    def resolve_stats(self) -> None:
        """Compute every capture's statistics now (they are otherwise computed on first read)."""
        resolve_records(self.captures)


@dataclass
class ForwardResult(_Captures):
    """One forward with a plan applied."""

    output: Any
    captures: dict[str, list[CaptureRecord]]
    calls: dict[str, int]
    forward_ms: float
    total_ms: float
    device: str
    recaptured: tuple[str, ...] = ()


@dataclass(frozen=True)
class Baseline:
    """The baseline forward of a comparison, reusable while only the plan's values change.

    It is valid for the same module weights and inputs; ``device``, the set of
    ``hooked`` modules (which decides the kernels, see :func:`inert_hooks`) and
    whether stop points were in place are checked by :func:`compare`.
    """

    output: Any
    ms: float
    device: str
    hooked: frozenset[str]
    stoppable: bool


@dataclass
class RunResult(_Captures):
    """A baseline forward and an intervened forward of the same input."""

    output_without: Any
    output_with: Any
    outputs_differ: bool
    max_abs_diff: float
    captures: dict[str, list[CaptureRecord]]
    calls: dict[str, int]
    device: str
    timings_ms: dict[str, float] = field(default_factory=dict)
    plan: Plan | None = None
    recaptured: tuple[str, ...] = ()
    baseline: Baseline | None = None
    baseline_reused: bool = False

    def to_json_dict(self) -> dict:
        """The CLI's ``--json`` object."""
        return {
            "output_without": flat_floats(self.output_without),
            "output_with": flat_floats(self.output_with),
            "outputs_differ": self.outputs_differ,
            "max_abs_diff": self.max_abs_diff,
            "captures": {
                path: [
                    {"shape": list(r.stats.shape), "min": r.stats.min, "max": r.stats.max,
                     "mean": r.stats.mean, "std": r.stats.std,
                     **({"intervention": r.intervention,
                         "fraction_clamped": r.stats.fraction_clamped} if r.intervention else {})}
                    if r.stats is not None else {"shape": None}
                    for r in recs
                ]
                for path, recs in self.captures.items()
            },
            "device": self.device,
            "timings_ms": {k: round(v, 4) for k, v in self.timings_ms.items()},
        }


def flat_array(value: Any) -> np.ndarray:
    """Every tensor leaf of ``value`` flattened into one float64 array."""
    parts = [t.detach().reshape(-1).double().cpu().numpy() for _, t in tensor_leaves(value)]
    return np.concatenate(parts) if parts else np.zeros(0)


def flat_floats(value: Any) -> list[float]:
    """Every tensor leaf of ``value`` flattened into one list of Python floats (for JSON)."""
    return flat_array(value).tolist()


def to_device(inputs: Any, dev: torch.device) -> Any:
    return map_tensors(lambda t: t.to(dev), inputs)


def own_copy(inputs: Any) -> Any:
    """A copy of the inputs for one forward.

    A model may change its input in place (``x.mul_(2)``); the baseline, the
    intervened forward and a re-run must each see the input as given, and the
    caller's tensors must come back unchanged.
    """
    return map_tensors(lambda t: t.clone(), inputs)


def place_module(module: nn.Module, dev: torch.device) -> None:
    """Move ``module`` to ``dev`` unless it is already there.

    ``nn.Module.to`` walks every submodule even when nothing moves; in Live
    mode on a small model that walk would cost more than the forward.
    """
    first = next(itertools.chain(module.parameters(), module.buffers()), None)
    if first is None or first.device != dev:
        module.to(dev)


def call_model(module: nn.Module, inputs: Any) -> Any:
    """Call ``module`` the way its input asks: a tuple spreads, a dict is keywords."""
    if isinstance(inputs, tuple) and not hasattr(inputs, "_fields"):
        return module(*inputs)
    if isinstance(inputs, dict):
        return module(**inputs)
    if isinstance(inputs, CallArgs):  # positional and keyword inputs together
        return module(*inputs.args, **inputs.kwargs)
    return module(inputs)


def forward(module: nn.Module, inputs: Any, grad_mode=torch.inference_mode) -> Any:
    """Call the model; its own errors come back as :class:`ForwardError`."""
    try:
        with grad_mode_for(module, grad_mode)():
            return call_model(module, inputs)
    except HookscopeError:
        raise
    except Exception as exc:  # the model's own error, made readable
        if needs_autograd(exc) and mark_needs_grad(module):  # its forward differentiates
            return forward(module, inputs, grad_mode)
        raise ForwardError(forward_error_message(module, inputs, exc)) from exc


def forward_error_message(module: nn.Module, inputs: Any, exc: Exception) -> str:
    shapes = ", ".join(f"{tuple(t.shape)} {str(t.dtype).removeprefix('torch.')}"
                       for _, t in tensor_leaves(inputs)) or "no tensors"
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    if needs_autograd(exc):
        return f"{AUTOGRAD_MESSAGE} ({type(exc).__name__}: {first})"
    return (f"the model's forward failed on the input ({shapes}): {type(exc).__name__}: {first}. "
            "Check that the input's shape and dtype are what the model expects.")


def run(module: nn.Module, inputs: Any, plan: Plan | None = None, device: str = "cpu") -> ForwardResult:
    """One forward of ``module`` on ``inputs`` with ``plan`` applied.

    The module is moved to ``device`` (as ``nn.Module.to`` does) and every
    hook added is removed before this returns or raises. ``output`` and kept
    captures are on the CPU.
    """
    plan = plan or Plan()
    dev = resolve_device(device)
    layers = plan.resolve(module)
    place_module(module, dev)
    return _run_resolved(module, to_device(inputs, dev), layers, plan.keep_tensors, dev)


def _run_resolved(module, x, layers: dict[str, LayerPlan], keep_tensors: bool,
                  dev: torch.device) -> ForwardResult:
    t0 = time.perf_counter()
    keep = keep_tensors and any(lp.capture for lp in layers.values())
    known = _INPLACE_VICTIMS.get(module, set())
    start = snapshot(module)  # a re-run starts where the first run did
    out, captures, calls, fwd_ms, stale = _hooked_forward(module, x, layers, keep, known, dev)
    recaptured: tuple[str, ...] = ()
    if stale:
        # Learned: these captures need a copy. Run again with exactly those copied.
        victims = _INPLACE_VICTIMS.setdefault(module, set())
        victims |= stale
        recaptured = tuple(sorted(stale))
        restore(module, start)
        out, captures, calls, fwd_ms, _ = _hooked_forward(module, x, layers, True, victims, dev)
    output = map_tensors(lambda t: t.detach().cpu(), out)
    total = (time.perf_counter() - t0) * 1e3
    return ForwardResult(output, captures, calls, fwd_ms, total, str(dev), recaptured)


def _hooked_forward(module, x, layers, keep, clone_paths, dev):
    session = HookSession(layers, keep_tensors=keep, clone_paths=clone_paths)
    # Inference tensors have no version counter, which in-place detection needs.
    grad_mode = torch.no_grad if keep else torch.inference_mode
    with session:
        synchronize(dev)
        t0 = time.perf_counter()
        out = forward(module, own_copy(x), grad_mode)
        synchronize(dev)
        fwd_ms = (time.perf_counter() - t0) * 1e3
    stale = session.stale_paths() if keep else set()
    return out, session.finish(), session.calls(), fwd_ms, stale


def inert_hooks(layers: dict[str, LayerPlan]) -> HookSession:
    """Hooks that do nothing, on the modules a plan touches.

    Some modules choose their kernels by whether hooks are attached (PyTorch's
    Transformer layers skip their fused fast path when a submodule has a
    hook). A baseline carrying inert hooks on the same modules takes exactly
    the kernels of the intervened run, so a capture-only plan never shows a
    last-bit difference that the plan did not make.
    """
    return HookSession({p: LayerPlan(p, lp.module) for p, lp in layers.items()},
                       keep_tensors=False)


@contextlib.contextmanager
def stop_points(module: nn.Module, should_stop: Callable[[], bool] | None):
    """Let a forward stop early: before each leaf module runs, ``should_stop()``
    is asked, and :class:`Cancelled` is raised if it says so.

    A forward cannot be interrupted from outside; these pre-hooks are the
    places where it may stop. Live mode uses them to drop a run that a newer
    bound has made stale instead of finishing it.
    """
    if should_stop is None:
        yield
        return

    def check(_m: nn.Module, _args: Any) -> None:
        if should_stop():
            raise Cancelled("run cancelled: a newer request replaced it")

    handles = []
    try:
        for m in module.modules():
            if next(m.children(), None) is None:
                handles.append(m.register_forward_pre_hook(check))
        yield
    finally:
        for h in handles:
            h.remove()


def compare(module: nn.Module, inputs: Any, plan: Plan | None = None, device: str = "cpu",
            baseline: Baseline | None = None,
            should_stop: Callable[[], bool] | None = None) -> RunResult:
    """Baseline forward (no interventions) and intervened forward (``plan``), side by side.

    Returns a :class:`RunResult` with both outputs on the CPU, whether they
    differ, the largest absolute difference, the captures of the intervened
    run and timings in milliseconds (``baseline``, ``intervened``,
    ``overhead`` = intervened minus baseline, ``total``).

    ``baseline``: a previous result's :attr:`RunResult.baseline` for the same
    module and inputs; it is reused when it still fits (same device, same
    hooked layers), so dragging a bound costs one forward, not two.
    ``should_stop``: see :func:`stop_points`; raises :class:`Cancelled`.
    """
    plan = plan or Plan()
    dev = resolve_device(device)
    layers = plan.resolve(module)  # fail on a bad plan before any work
    place_module(module, dev)
    x = to_device(inputs, dev)
    t0 = time.perf_counter()
    hooked = frozenset(layers)
    stoppable = should_stop is not None
    start = snapshot(module)  # both forwards start from the same RNG state and buffers
    reused = (baseline is not None and baseline.device == str(dev) and baseline.hooked == hooked
              and baseline.stoppable == stoppable)
    with stop_points(module, should_stop):
        if not reused:
            with inert_hooks(layers):
                synchronize(dev)
                tb = time.perf_counter()
                base = forward(module, own_copy(x), torch.inference_mode)
                synchronize(dev)
                base_ms = (time.perf_counter() - tb) * 1e3
            baseline = Baseline(map_tensors(lambda t: t.detach().cpu(), base), base_ms, str(dev),
                                hooked, stoppable)
            restore(module, start)
        try:
            res = _run_resolved(module, x, layers, plan.keep_tensors, dev)
        finally:
            restore(module, start)  # the comparison leaves the model as it found it
    assert baseline is not None
    differ, max_diff = output_difference(baseline.output, res.output)
    total = (time.perf_counter() - t0) * 1e3
    return RunResult(
        output_without=baseline.output,
        output_with=res.output,
        outputs_differ=differ,
        max_abs_diff=max_diff,
        captures=res.captures,
        calls=res.calls,
        device=str(dev),
        timings_ms={"baseline": baseline.ms, "intervened": res.forward_ms,
                    "overhead": res.forward_ms - baseline.ms, "total": total},
        plan=plan,
        recaptured=res.recaptured,
        baseline=baseline,
        baseline_reused=reused,
    )


def output_difference(a: Any, b: Any) -> tuple[bool, float]:
    """Whether two (nested) outputs differ anywhere, and the largest |a - b|.

    NaN in the same place in both counts as equal.
    """
    la, lb = tensor_leaves(a), tensor_leaves(b)
    if [k for k, _ in la] != [k for k, _ in lb]:
        return True, float("inf")
    differ = False
    worst = 0.0
    for (_, ta), (_, tb) in zip(la, lb):
        if ta.shape != tb.shape:
            return True, float("inf")
        if not torch.equal(ta, tb):
            da, db = ta.double(), tb.double()
            same_nan = torch.isnan(da) & torch.isnan(db)
            d = (da - db).abs().masked_fill(same_nan, 0.0)
            if bool((d != 0).any()):
                differ = True
                d = d.nan_to_num(nan=float("inf"))
                worst = max(worst, float(d.max()))
    return differ, worst
