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
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
import torch
from torch import nn

from ..base.devices import accelerator_devices, resolve_device, synchronize
from ..model.dispatch import is_dispatched
from ..model.learned import ModelMemory, memory_for
from ..base.errors import Cancelled, ForwardError, HookscopeError
from .forward_state import ForwardState, forward, own_copy, restore, snapshot, to_device
from .capture_record import CaptureRecord
from . import fast_slot
from .hooks import HookSession
from ..base.call_args import CallArgs, call_model
from ..plan.interventions import Clamp
from ..model.module_walk import module_walk, unique_modules
from ..base.nested import NestingError, map_tensors, tensor_leaves
from ..plan.plan import LayerPlan, Plan
from .receipts import Receipt, Tally, alarms, receipts_for
from .source_pass import source_groups, source_outputs
from ..base.user_text import safe_str
from .output_diff import flat_floats
from .output_diff import output_change, output_difference as diff
from .verdict import output_verdict
from ..views.result_html import result_html, result_text
from ..views.result_table import result_dataframe

class _Captures:
    """What every result with ``captures`` offers."""

    captures: dict[str, list[CaptureRecord]]

    @property
    def captured_bytes(self) -> int:
        """Bytes held by the kept tensors (after and before interventions, and the baseline's)."""
        return sum(r.nbytes for recs in self.captures.values() for r in recs)


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
    #: The intervened layers' receipt counts (core/engine/receipts.py), by path.
    tallies: dict[str, Tally] = field(default_factory=dict, repr=False)


@dataclass(frozen=True)
class Baseline:
    """The baseline forward of a comparison, reusable while only the plan's values change.

    It is valid for the same module weights and inputs; ``device``, the set of
    ``hooked`` modules (which decides the kernels, see :func:`inert_hooks`),
    the ``captured`` layers, ``keep_tensors`` and whether stop points were in
    place are checked by :func:`compare`. ``captures`` are the baseline's own
    records of the captured layers; ``sources`` caches pre-pass outputs
    (:mod:`~hookscope.core.engine.source_pass`) by source input, so a reused baseline
    does not repeat a patch's source forward either.
    """

    output: Any
    ms: float
    device: str
    hooked: frozenset[str]
    stoppable: bool
    captures: dict[str, list[CaptureRecord]] = field(default_factory=dict, compare=False)
    captured: frozenset[str] = frozenset()
    keep_tensors: bool = True
    sources: dict = field(default_factory=dict, compare=False, repr=False)

    def fits(self, device: str, hooked: frozenset[str], captured: frozenset[str],
             keep_tensors: bool, stoppable: bool) -> bool:
        """Whether a comparison with these settings can reuse this baseline."""
        return (self.device == device and self.hooked == hooked and self.captured == captured
                and self.keep_tensors == keep_tensors and self.stoppable == stoppable)


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
    #: The baseline forward was the model's first on inputs of this shape in this process:
    #: its time includes one-time set-up (torch readying kernels for those shapes), often
    #: many times the forward itself, so it is no measure of the model (see
    #: ``ModelMemory.ran_on``). The CLI says "first run" beside it.
    first_run: bool = False
    #: The input as it ran (the runner sets it: a ``text:`` prompt's token ids, or the
    #: tensors of the input text); ``None`` where nobody did.
    inputs: Any = None
    #: What the output means (an OutputMeaning: labels, tokenizer), set by the runner.
    meaning: Any = None
    #: Display-ready numbers (a :class:`~hookscope.core.views.ResultDisplay`), made in the
    #: runner's thread for a front end that draws (``runner.make_display``); else ``None``.
    display: Any = None

    def _repr_html_(self) -> str:
        """A notebook's view: verdict, captures without/with, top classes or next tokens."""
        return result_html(self, output_verdict(self))

    def __repr__(self) -> str:
        """A few lines (a terminal's view; the dataclass's would print every tensor)."""
        return result_text(self, output_verdict(self))

    def to_dataframe(self) -> Any:
        """One row per captured layer call (pandas, which this needs, is optional)."""
        return result_dataframe(self)

    #: ``{path: Receipt}``: what each intervention did in this run (core/engine/receipts.py).
    receipts: dict[str, Receipt] = field(default_factory=dict)

    @property
    def alarms(self) -> list[str]:
        """One line per intervention that may have done nothing (see :class:`Receipt`)."""
        return alarms(self.receipts)

    #: Views derived from the same model, input and plan, by name: ``"lens"``
    #: (:class:`~hookscope.core.analyses.logit_lens.LensResult`), ``"generation"``.
    extras: dict[str, Any] = field(default_factory=dict)

    def to_json_dict(self) -> dict:
        """The CLI's ``--json`` object."""

        return {
            "output_without": flat_floats(self.output_without),
            "output_with": flat_floats(self.output_with),
            "outputs_differ": self.outputs_differ,
            "max_abs_diff": self.max_abs_diff,
            "verdict": output_verdict(self),
            "captures": {path: [record_json(r) for r in recs] for path, recs in self.captures.items()},
            "interventions": ({p: iv.to_dict() for p, iv in self.plan.interventions.items()}
                              if self.plan is not None else {}),
            "receipts": {p: r.to_json_dict() for p, r in self.receipts.items()},
            "device": self.device,
            "timings_ms": {**{k: round(v, 4) for k, v in self.timings_ms.items()},
                           "first_run": self.first_run},
            **{name: view.to_json_dict() for name, view in self.extras.items()},
        }


def _summary_json(s) -> dict:
    return {"min": s.min, "max": s.max, "mean": s.mean, "std": s.std,
            "nan_count": s.nan_count, "inf_count": s.inf_count}


def record_json(r: CaptureRecord) -> dict:
    """One capture in ``--json``: the intervened run's summary, the baseline's, what changed."""
    s = r.stats
    if s is None:
        return {"shape": None}
    d: dict[str, Any] = {"shape": list(s.shape), **_summary_json(s)}
    if r.intervention:
        d["intervention"] = r.intervention
        d["fraction_changed"] = s.fraction_changed
        if r.intervention_obj is not None and isinstance(r.intervention_obj, Clamp):
            d["fraction_clamped"] = s.fraction_changed
    b = r.baseline_stats
    if b is not None:
        d["baseline"] = _summary_json(b)
    if r.extra_leaves:  # a nested output: the first leaf above, every other one by its name
        d["leaf"] = r.leaf
        d["other_leaves"] = {e.leaf: record_json(e) for e in r.extra_leaves}
    return d


def place_module(module: nn.Module, dev: torch.device) -> None:
    """Move ``module`` to ``dev`` unless it is already there.

    ``nn.Module.to`` walks every submodule even when nothing moves; in Live
    mode on a small model that walk would cost more than the forward.
    A model placed by accelerate (:mod:`.dispatch`) stays where it is.
    """
    if is_dispatched(module):
        return
    first = next(itertools.chain(module.parameters(), module.buffers()), None)
    if first is None or first.device != dev:
        module.to(dev)


def run(module: nn.Module, inputs: Any, plan: Plan | None = None, device: str = "cpu",
        codec: Any = None, memory: ModelMemory | None = None,
        baseline: dict[str, list[CaptureRecord]] | None = None) -> ForwardResult:
    """One forward of ``module`` on ``inputs`` with ``plan`` applied.

    ``codec``: the model's tokenizer (``load_model(...).meaning.codec``), for ``text:``
    source inputs of patches and reference means. ``memory``: what runs learned about
    the model (``LoadedModel.memory``; by default the module's own, see
    :mod:`hookscope.core.model.learned`). ``baseline``: another run's captures of the
    same layers (another model's, say), given to each record as its baseline and
    binned with it, as :func:`compare` does with its baseline forward.

    The module is moved to ``device`` (as ``nn.Module.to`` does) and every
    hook added is removed before this returns or raises. ``output`` and kept
    captures are on the CPU.
    """
    plan = plan or Plan()
    dev = resolve_device(device)
    tree = module_walk(module)
    layers = plan.resolve(module, tree)
    place_module(module, dev)
    x = to_device(inputs, dev)
    groups = source_groups(layers, x, dev, codec)
    sources = source_outputs(module, layers, groups) if groups else None
    # The modules as the plan found them, unless a source forward ran since (it could add
    # some); only a run that keeps tensors asks (its snapshot, its first-run guard).
    owners = unique_modules(tree) if plan.keep_tensors and not groups else None
    return _run_resolved(module, x, layers, plan.keep_tensors, dev, sources, baseline,
                         modules=owners, memory=memory)


class _GuardRefused(Exception):
    """A forward under a speed-up's in-place guard raised: run it again without."""


def _run_resolved(module, x, layers: dict[str, LayerPlan], keep_tensors: bool,
                  dev: torch.device, sources: dict[str, list[Any]] | None = None,
                  baseline: dict[str, list[CaptureRecord]] | None = None,
                  start: ForwardState | None = None,
                  modules: list[nn.Module] | None = None,
                  memory: ModelMemory | None = None) -> ForwardResult:
    """One run of resolved ``layers``. ``start``: the model's state now, where the
    caller has it (compare() does), so it is not recorded twice. ``modules``:
    ``module.modules()`` from the caller's walk, listed since the model's last
    forward, where the caller has them. ``memory``: the model's learned facts."""
    t0 = time.perf_counter()
    memory = memory_for(module, memory)
    keep = keep_tensors and any(lp.capture for lp in layers.values())
    extra = dict(sources=sources, baseline=baseline, modules=modules)
    # A re-run starts where the first run did. Only a run that keeps tensors can re-run
    # (to learn in-place victims), so statistics-only runs skip copying every buffer.
    if start is None and keep:
        start = snapshot(module, modules)
    try:
        out, captures, calls, fwd_ms, stale, tallies = _hooked_forward(module, x, layers, keep, memory,
                                                                      dev, **extra)
    except _GuardRefused:
        # An op that cannot run under a dispatch mode (rare custom kernels): the version
        # counters find the victims (at the cost of a second forward); a model error
        # raises again here.
        assert start is not None  # a guard only watches a run that keeps tensors
        restore(module, start)
        out, captures, calls, fwd_ms, stale, tallies = _hooked_forward(module, x, layers, keep, memory,
                                                                      dev, **extra)
    recaptured: tuple[str, ...] = ()
    if stale:
        # Learned: these captures need a copy. Run again with exactly those copied.
        memory.victims |= stale
        recaptured = tuple(sorted(stale))
        assert start is not None  # stale paths are only looked for when keeping
        restore(module, start)
        # Copied, every one: the re-run's result is the one returned, so none of its
        # captures may depend on an input that could change (fast/victim_remake.py).
        out, captures, calls, fwd_ms, _, tallies = _hooked_forward(module, x, layers, True, memory, dev,
                                                                  may_learn=False, remake=False, **extra)
    try:
        output = map_tensors(lambda t: t.detach().cpu(), out)
    except NestingError as exc:
        raise ForwardError(f"the model's output cannot be read: {exc}") from exc
    total = (time.perf_counter() - t0) * 1e3
    return ForwardResult(output, captures, calls, fwd_ms, total, str(dev), recaptured, tallies)


def _session(module: nn.Module, layers: dict[str, LayerPlan], keep: bool, memory: ModelMemory,
             sources: Any, baseline: Any, may_learn: bool, remake: bool,
             modules: list[nn.Module] | None) -> HookSession:
    """The hook session of one forward: the speed-ups' where they are on
    (:mod:`.fast_slot`), else the reference :class:`HookSession`."""
    fast = fast_slot.active()
    if fast is None:
        return HookSession(layers, keep_tensors=keep, clone_paths=memory.victims, sources=sources,
                           baseline=baseline)
    return fast.session(module, layers, memory, keep_tensors=keep, clone_paths=memory.victims,
                        sources=sources, baseline=baseline, may_learn=may_learn, remake=remake,
                        modules=modules)


def hook_session(module: nn.Module, layers: dict[str, LayerPlan], keep_tensors: bool = True,
                 memory: ModelMemory | None = None) -> HookSession:
    """The hook session a steady run of ``module`` arms for resolved ``layers`` (the
    speed-ups' where they are on), e.g. to time arming and disarming."""
    return _session(module, layers, keep_tensors, memory_for(module, memory), None, None,
                    may_learn=False, remake=True, modules=None)


def _hooked_forward(module, x, layers, keep, memory: ModelMemory, dev, sources=None,
                    baseline=None, may_learn=True, remake=True, modules=None):
    """One hooked forward; returns (output, captures, calls, forward ms, stale paths,
    receipt tallies of the intervened layers). The layers in ``memory.victims`` are
    copied at capture time; what the forward learned goes into ``memory``.
    """
    session = _session(module, layers, keep, memory, sources, baseline, may_learn, remake, modules)
    # Inference tensors have no version counter, which in-place detection needs.
    grad_mode = torch.no_grad if keep else torch.inference_mode
    gpus = accelerator_devices(dev, module)
    try:
        with session:
            synchronize(gpus)
            t0 = time.perf_counter()
            with session.watching(module, modules):
                out = forward(module, own_copy(x), grad_mode, memory)
            synchronize(gpus)
            fwd_ms = (time.perf_counter() - t0) * 1e3
    except ForwardError as exc:
        if not session.learning:
            raise
        memory.watched |= set(layers)  # not under the guard again
        raise _GuardRefused() from exc
    stale = session.stale_paths() if keep else set()
    session.learned(memory)  # after stale_paths, which finds what cannot be remade
    return out, session.finish(), session.calls(), fwd_ms, stale, session.tallies


def inert_hooks(layers: dict[str, LayerPlan]) -> HookSession:
    """Hooks that do nothing, on the modules a plan touches.

    Some modules choose their kernels by whether hooks are attached (PyTorch's
    Transformer layers skip their fused fast path when a submodule has a
    hook). A baseline carrying inert hooks on the same modules takes exactly
    the kernels of the intervened run, so a capture-only plan never shows a
    last-bit difference that the plan did not make.
    """
    return HookSession({p: LayerPlan(p, lp.module, at_input=lp.at_input, mid_block=lp.mid_block)
                        for p, lp in layers.items()},
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
            should_stop: Callable[[], bool] | None = None, codec: Any = None,
            memory: ModelMemory | None = None) -> RunResult:
    """Baseline forward (no interventions) and intervened forward (``plan``), side by side.

    Returns a :class:`RunResult` with both outputs on the CPU, whether they
    differ, the largest absolute difference, the captures of the intervened
    run (each with the same call of the baseline run: ``baseline_tensor``,
    ``baseline_stats``) and timings in milliseconds (``baseline``,
    ``intervened``, ``overhead`` = intervened minus baseline, at least 0, ``total``; a
    patch's source forward, when one runs, as ``source``).

    The baseline forward captures the same layers as the intervened one (with
    the plan's ``keep_tensors``), so its cost is that of a capture forward.

    ``baseline``: a previous result's :attr:`RunResult.baseline` for the same
    module and inputs; it is reused when it still fits (same device, hooked
    and captured layers, keep_tensors), so dragging a bound costs one forward,
    not two, and a patch's source forward is not repeated.
    ``should_stop``: see :func:`stop_points`; raises :class:`Cancelled`.
    ``codec``: the model's tokenizer (``load_model(...).meaning.codec``), for ``text:``
    source inputs of patches and reference means.
    ``memory``: what runs learned about the model (``LoadedModel.memory``; by default
    the module's own, see :mod:`hookscope.core.model.learned`).
    """
    plan = plan or Plan()
    dev = resolve_device(device)
    tree = module_walk(module)
    layers = plan.resolve(module, tree)  # fail on a bad plan before any work
    memory = memory_for(module, memory)
    place_module(module, dev)
    x = to_device(inputs, dev)
    groups = source_groups(layers, x, dev, codec)  # a bad source input fails before any forward too
    t0 = time.perf_counter()
    hooked = frozenset(layers)
    captured = frozenset(p for p, lp in layers.items() if lp.capture)
    stoppable = should_stop is not None
    reused = baseline is not None and baseline.fits(str(dev), hooked, captured, plan.keep_tensors,
                                                      stoppable)
    timings: dict[str, float] = {}
    owners = unique_modules(tree)
    start = snapshot(module, owners)  # every forward of the comparison starts from the same RNG state and buffers
    first_run = not reused and memory.first_forward_on(x)
    with stop_points(module, should_stop):
        if not reused:
            # The same layers captured, nothing changed; the intervened-only layers carry
            # inert hooks so both runs take the same kernels (see inert_hooks).
            clean = {p: LayerPlan(p, lp.module, capture=lp.capture, at_input=lp.at_input,
                               mid_block=lp.mid_block) for p, lp in layers.items()}
            b = _run_resolved(module, x, clean, plan.keep_tensors, dev, start=start,
                              modules=owners, memory=memory)
            baseline = Baseline(b.output, b.forward_ms, str(dev), hooked, stoppable,
                                captures=b.captures, captured=captured,
                                keep_tensors=plan.keep_tensors)
            restore(module, start)
        assert baseline is not None
        sources = None
        if groups:
            ts = time.perf_counter()
            sources = source_outputs(module, layers, groups, cache=baseline.sources)
            timings["source"] = (time.perf_counter() - ts) * 1e3
            restore(module, start)
        try:
            res = _run_resolved(module, x, layers, plan.keep_tensors, dev, sources, baseline.captures,
                                start=start, memory=memory)
        finally:
            restore(module, start)  # the comparison leaves the model as it found it
    # only a plan with interventions pays for its receipts (and their relative change)
    differ, max_diff, rel = output_change(baseline.output, res.output, relative=bool(res.tallies))
    receipts: dict[str, Receipt] = {}
    if res.tallies:
        receipts = receipts_for(res.tallies, {p: lp.intervention.describe() for p, lp in layers.items()
                                              if lp.intervention is not None}, differ, max_diff, rel)
    total = (time.perf_counter() - t0) * 1e3
    timings = {"baseline": baseline.ms, "intervened": res.forward_ms,
               # what the hooks cost; a "negative cost" is timing noise (the first forward
               # carries one-time set-up), so it floors at 0
               "overhead": max(0.0, res.forward_ms - baseline.ms), **timings, "total": total}
    return RunResult(
        output_without=baseline.output,
        output_with=res.output,
        outputs_differ=differ,
        max_abs_diff=max_diff,
        captures=res.captures,
        calls=res.calls,
        device=str(dev),
        timings_ms=timings,
        plan=plan,
        recaptured=res.recaptured,
        baseline=baseline,
        baseline_reused=reused,
        first_run=first_run,
        receipts=receipts,
    )


def output_difference(a: Any, b: Any) -> tuple[bool, float]:
    """Whether two (nested) outputs differ anywhere, and the largest |a - b|
    (NaN in the same place in both counts as equal); see :mod:`.output_diff`."""
    return diff(a, b)
