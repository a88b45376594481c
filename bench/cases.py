"""The benchmark's cases: each is a callable that does one unit of work on a model.

Every case is compared against the plain forward (``torch.inference_mode``, no
hooks) of the same model and input. Hookscope cases go through the public
API (:func:`hookscope.core.run`), so they pay everything a user pays: plan
resolution, arming and disarming hooks, statistics, moving kept tensors to the
CPU. The naive references are written by hand, the way a person would.

Each case may also say whether its result is *correct* (captures equal to a
clone-everything reference with ``torch.equal``) and how many bytes it kept.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass
from typing import Any, Callable

import torch
from torch import nn

from hookscope.core import Plan, compare, run
from hookscope.core.engine.run import hook_session
from hookscope.core.base.nested import tensor_leaves
from hookscope.core.base.call_args import call_model

from .models import BenchModel, leaf_paths


@dataclass(frozen=True)
class Target:
    """What a case must reach: a ratio to plain (``ratio``), absolute milliseconds
    (``ms``), or at most ``limit`` above the ratio of the reference case ``floor``
    measured in the same rounds (``floor``)."""

    kind: str      # "ratio", "ms" or "floor"
    limit: float
    memory: str = ""   # "" | "capture" (plain + 1.1 × captured) | "stats" (≤ 1.10 × plain)
    floor: str = ""    # the reference case a "floor" target is read against

    def describe(self) -> str:
        if self.kind == "floor":
            t = f"≤ {FLOOR_NAMES.get(self.floor, self.floor)} + {self.limit:.2f}"
        else:
            t = f"≤ {self.limit:.2f}×" if self.kind == "ratio" else f"≤ {self.limit:g} ms"
        if self.memory == "capture":
            t += ", mem ≤ plain + 1.1×captured"
        elif self.memory == "stats":
            t += ", mem ≤ 1.10× plain"
        return t


#: Short names of the reference cases, for the target column.
FLOOR_NAMES = {"naive_detach": "detach ref", "aminmax_ref": "aminmax ref"}


@dataclass
class Case:
    """One case on one model."""

    name: str
    title: str
    fn: Callable[[], Any]
    target: Target | None = None
    # Given fn()'s result: (correct?, note). None: nothing to check.
    check: Callable[[Any], tuple[bool, str]] | None = None
    captured_bytes: Callable[[Any], int] | None = None
    memory: bool = False   # measured for peak memory
    note: str = ""
    # Run before each timed call, outside the timed region (e.g. a fresh model copy).
    prepare: Callable[[], None] | None = None
    # What the case is paired against instead of one plain forward (compare(): two).
    plain: Callable[[], Any] | None = None


# -- plain and hand-written references --------------------------------------------
def plain_forward(bm: BenchModel) -> Callable[[], Any]:
    module, x = bm.module, bm.inputs

    def fn() -> Any:
        with torch.inference_mode():
            return call_model(module, x)
    return fn


class _Store:
    """A hand-written capture hook: keeps the first tensor of each call's output."""

    __slots__ = ("out", "clone")

    def __init__(self, out: list, clone: bool):
        self.out, self.clone = out, clone

    def __call__(self, module: nn.Module, args: Any, output: Any) -> None:
        leaves = tensor_leaves(output)
        if leaves:
            d = leaves[0][1].detach()
            self.out.append(d.clone() if self.clone else d)


class _AminMax:
    """A hand-written statistics hook: one ``torch.aminmax`` of each call's first tensor
    (every value read once, nothing kept but two scalars on the device)."""

    __slots__ = ("out",)

    def __init__(self, out: list):
        self.out = out

    def __call__(self, module: nn.Module, args: Any, output: Any) -> None:
        leaves = tensor_leaves(output)
        if leaves and leaves[0][1].is_floating_point() and leaves[0][1].numel():
            self.out.append(torch.aminmax(leaves[0][1]))


def aminmax_reference(bm: BenchModel, paths: list[str]) -> Callable[[], Any]:
    """The one-pass floor of statistics-only capture: hooks on ``paths`` doing one
    ``aminmax`` per call, registered, run and removed inside the call."""
    mods = dict(bm.module.named_modules())
    module, x = bm.module, bm.inputs

    def fn() -> tuple[Any, list]:
        out: list = []
        handles = [mods[p].register_forward_hook(_AminMax(out)) for p in paths]
        try:
            with torch.inference_mode():
                y = call_model(module, x)
        finally:
            for h in handles:
                h.remove()
        return y, out
    return fn


def naive_capture(bm: BenchModel, paths: list[str],
                  clone: bool | Callable[[], set[str]]) -> Callable[[], Any]:
    """Hooks on ``paths`` storing ``detach()`` (or ``detach().clone()``); registered,
    run and removed inside the call, as a script would. ``clone`` may name the
    layers to copy instead (a callable, asked at each call: its answer is found
    in the warm-up, see :func:`victim_paths`)."""
    mods = dict(bm.module.named_modules())
    module, x = bm.module, bm.inputs

    def fn() -> tuple[Any, dict[str, list[torch.Tensor]]]:
        chosen = clone() if callable(clone) else None
        caps: dict[str, list[torch.Tensor]] = {p: [] for p in paths}
        handles = [mods[p].register_forward_hook(
            _Store(caps[p], p in chosen if chosen is not None else bool(clone))) for p in paths]
        try:
            with torch.inference_mode():
                out = call_model(module, x)
        finally:
            for h in handles:
                h.remove()
        return out, caps
    return fn


def victim_paths(bm: BenchModel, paths: list[str]) -> set[str]:
    """The layers whose bare ``detach()`` capture a later in-place op overwrote
    (``ReLU(inplace=True)``, ``out += identity``): what a correct hand-written
    capture must copy. Found against the clone reference, not taken from
    Hookscope's own bookkeeping."""
    _, caps = naive_capture(bm, paths, clone=False)()
    ref = reference(bm, paths)
    return {p for p, ts in ref.items()
            if len(caps[p]) != len(ts) or not all(torch.equal(a.cpu(), b) for a, b in zip(caps[p], ts))}


def reference(bm: BenchModel, paths: list[str]) -> dict[str, list[torch.Tensor]]:
    """The clone-everything reference captures, on the CPU.

    Its hooks sit on the same modules as Hookscope's, so both take the same
    kernels (hooks switch Transformer layers off their fused path) and
    equality can be exact.
    """
    _, caps = naive_capture(bm, paths, clone=True)()
    return {p: [t.cpu() for t in ts] for p, ts in caps.items()}


def count_stale(caps: dict[str, list[torch.Tensor]], ref: dict[str, list[torch.Tensor]]
                ) -> tuple[int, int]:
    """How many captures differ from the reference, out of how many."""
    total = stale = 0
    for p, ts in ref.items():
        for i, r in enumerate(ts):
            total += 1
            got = caps[p][i] if i < len(caps[p]) else None
            if got is None or not torch.equal(got.cpu(), r):
                stale += 1
    return stale, total


def stale_verdict(caps: dict[str, list[torch.Tensor]], ref: dict[str, list[torch.Tensor]]
                  ) -> tuple[bool, str]:
    """A check's answer: no capture differs from the reference, and how many do."""
    stale, total = count_stale(caps, ref)
    return stale == 0, f"{stale} of {total} captures stale (overwritten in place)"


def _captures_equal(captures: dict, ref: dict[str, list[torch.Tensor]]) -> tuple[bool, str]:
    wrong = []
    total = 0
    for p, ts in ref.items():
        recs = captures.get(p, [])
        if len(recs) != len(ts):
            wrong.append(f"{p}: {len(recs)} calls, reference {len(ts)}")
            continue
        for rec, r in zip(recs, ts):
            total += 1
            if rec.tensor is None or not torch.equal(rec.tensor, r):
                wrong.append(f"{p}[{rec.call}]")
    if wrong:
        return False, f"{len(wrong)} of {total} differ: {', '.join(wrong[:3])}"
    return True, f"{total} captures equal to clone reference"


def _stats_match(captures: dict, ref: dict[str, list[torch.Tensor]]) -> tuple[bool, str]:
    """Statistics-only records: no tensor, exact min/max, mean/std to float32 accuracy.

    The histogram may bin a strided sample of a large tensor (core's choice, for
    speed), so its total is only checked to be positive and at most the count.
    """
    wrong = []
    total = sampled = 0
    for p, ts in ref.items():
        recs = captures.get(p, [])
        for rec, r in zip(recs, ts):
            total += 1
            s, rf = rec.stats, r.double()
            if s is None or rec.tensor is not None:
                wrong.append(f"{p}[{rec.call}]")
                continue
            mean, std = float(rf.mean()), float(rf.std(correction=0))
            hist_total = int(s.hist_counts.sum())
            sampled += hist_total < r.numel()
            ok = (s.count == r.numel() and s.min == float(rf.min()) and s.max == float(rf.max())
                  and abs(s.mean - mean) <= 1e-4 * (std + abs(mean)) + 1e-7
                  and math.isclose(s.std, std, rel_tol=1e-3, abs_tol=1e-6)
                  and 0 < hist_total <= r.numel())
            if not ok:
                wrong.append(f"{p}[{rec.call}]")
        if len(recs) != len(ts):
            wrong.append(f"{p}: {len(recs)} calls, reference {len(ts)}")
    if wrong:
        return False, f"{len(wrong)} of {total} stats off: {', '.join(wrong[:3])}"
    hist = f", {sampled} histograms from a sample" if sampled else ""
    return True, f"{total} stats match, no tensors kept{hist}"


def _result_bytes(res: Any) -> int:
    return res.captured_bytes


def _dict_bytes(out: Any) -> int:
    _, caps = out
    return sum(t.element_size() * t.numel() for ts in caps.values() for t in ts)


# -- the cases ---------------------------------------------------------------------
def model_cases(bm: BenchModel, device: str = "cpu") -> list[Case]:
    """Every benchmark case for one model (plain, captures, statistics, peers), in table order."""
    module, x = bm.module, bm.inputs
    leaves = leaf_paths(module)
    ref_all: dict[str, list[torch.Tensor]] = {}

    def ref() -> dict[str, list[torch.Tensor]]:
        if not ref_all:
            ref_all.update(reference(bm, leaves))
        return ref_all

    plan3 = Plan(capture=bm.capture3)
    plan_clamp = Plan(clamp={bm.clamp_path: bm.clamp})
    plan_all = Plan(capture=leaves)
    plan_stats = Plan(capture=leaves, keep_tensors=False)
    lo, hi = bm.clamp

    def clamp_check(res: Any) -> tuple[bool, str]:
        mod = dict(module.named_modules())[bm.clamp_path]
        h = mod.register_forward_hook(lambda m, a, o: o.clamp(lo, hi))
        try:
            with torch.inference_mode():
                want = call_model(module, x)
        finally:
            h.remove()
        ok = torch.equal(res.output, want.cpu())
        return ok, "output equals a hand-written clamp hook" if ok else "output differs"

    def stale_check(out: Any) -> tuple[bool, str]:
        _, caps = out
        return stale_verdict(caps, reference(bm, leaves))

    found: list[set[str]] = []

    def victims() -> set[str]:
        if not found:
            found.append(victim_paths(bm, leaves))
        return found[0]

    def victims_check(out: Any) -> tuple[bool, str]:
        ok, note = stale_check(out)
        return ok, f"{note}; {len(victims())} layers copied"

    plain1 = plain_forward(bm)

    def plain_twice() -> Any:
        plain1()
        return plain1()

    plan_cmp = Plan(capture=bm.capture3, clamp={bm.clamp_path: bm.clamp})
    n = len(leaves)
    return [
        Case("plain_aa", "plain vs plain (noise floor)", plain_forward(bm),
             note="A/A: the spread any ratio below carries", memory=True),
        Case("capture3", "Hookscope run(), capture 3 layers", lambda: run(module, x, plan3, device),
             Target("ratio", 1.02), check=lambda r: _captures_equal(r.captures,
                                                                   {p: ref()[p] for p in bm.capture3}),
             captured_bytes=_result_bytes, note=", ".join(bm.capture3)),
        Case("clamp1", "Hookscope run(), one clamp", lambda: run(module, x, plan_clamp, device),
             Target("ratio", 1.02), check=clamp_check,
             note=f"{bm.clamp_path} to [{lo:g}, {hi:g}]"),
        Case("every_leaf", "Hookscope run(), every leaf kept", lambda: run(module, x, plan_all, device),
             Target("floor", 0.05, "capture", floor="naive_detach"), check=lambda r: _captures_equal(r.captures, ref()),
             captured_bytes=_result_bytes, memory=True, note=f"{n} leaves, steady state"),
        Case("every_leaf_read", "Hookscope run(), every leaf kept, every tensor read",
             lambda: _read_every_tensor(run(module, x, plan_all, device)),
             check=lambda r: _captures_equal(r.captures, ref()),
             note="what a reader of every capture pays: in-place victims that are eval-mode "
                  "BatchNorms are computed from their input on first read (core/fast/victim_remake.py)"),
        Case("stats_only", "Hookscope run(), every leaf stats only",
             lambda: run(module, x, plan_stats, device),
             Target("floor", 0.05, "stats", floor="aminmax_ref"),
             check=lambda r: _stats_match(r.captures, ref()),
             captured_bytes=_result_bytes, memory=True, note=f"{n} leaves, keep_tensors=False"),
        Case("compare", "compare(), 3 captures + 1 clamp, vs TWO plain forwards",
             lambda: compare(module, x, plan_cmp, device), Target("ratio", 1.05), plain=plain_twice,
             check=lambda r: (r.outputs_differ, "baseline and clamped outputs differ"),
             note="baseline + intervened forward, output diff; ratio against 2 plain forwards"),
        Case("naive_detach", "hand hooks, every leaf detach() (capture floor)",
             naive_capture(bm, leaves, clone=False), check=stale_check,
             captured_bytes=_dict_bytes, memory=False, note="reference, wrong by design"),
        Case("aminmax_ref", "hand hooks, every leaf one aminmax (stats floor)",
             aminmax_reference(bm, leaves), note="reference: every value read once"),
        Case("naive_victims", "hand hooks, every leaf detach(), in-place victims clone()d",
             naive_capture(bm, leaves, clone=victims),
             check=victims_check,
             captured_bytes=_dict_bytes, memory=False,
             note="reference: the cheapest correct capture (copies only what a later "
                  "in-place op overwrites)"),
        Case("naive_clone", "hand hooks, every leaf detach().clone()",
             naive_capture(bm, leaves, clone=True), check=None,
             captured_bytes=_dict_bytes, memory=True, note="reference, the correct values"),
    ]


def _read_every_tensor(result: Any) -> Any:
    """``result`` after reading every capture's tensor once (a remade one is computed)."""
    for recs in result.captures.values():
        for rec in recs:
            rec.tensor  # noqa: B018 - the property computes a remade capture
    return result


def first_run_case(bm: BenchModel, device: str = "cpu") -> Case:
    """Every-leaf capture on a model Hookscope has never seen (learns its in-place
    victims with one extra forward). Each call uses a fresh deep copy, made outside
    the timed region by the case's ``prepare``."""
    leaves = leaf_paths(bm.module)
    plan_all = Plan(capture=leaves)
    holder: dict[str, nn.Module] = {}

    def prepare() -> None:
        holder["m"] = copy.deepcopy(bm.module)

    def fn() -> Any:
        return run(holder.pop("m"), bm.inputs, plan_all, device)

    def check(r: Any) -> tuple[bool, str]:
        ok, note = _captures_equal(r.captures, reference(bm, leaves))
        how = (f"re-ran once to copy {len(r.recaptured)} layers" if r.recaptured else
               f"one forward, {sum(x.copied for v in r.captures.values() for x in v)} "
               "captures kept from an in-place op (copied, or BatchNorms remade on read)")
        return ok, f"{how}; {note}"

    return Case("every_leaf_first", "Hookscope run(), every leaf, first run", fn,
                Target("ratio", 1.30), check=check,
                note="fresh model copy each time", prepare=prepare)


def compare_clamp_case(device: str = "cpu") -> Case:
    """``compare()`` on demo:clamp with one capture and one clamp: the Live-mode fixed cost."""
    from hookscope.core import load_model

    lm = load_model("demo:clamp")
    plan = Plan(capture=["0"], clamp={"0": (-0.5, 0.5)})
    return Case("compare_clamp", "compare() demo:clamp, 1 capture + 1 clamp",
                lambda: compare(lm.module, lm.example_input, plan, device),
                Target("ms", 1.0), note="two forwards, stats, output diff")


def arm_hooks_case(n: int = 1000) -> tuple[Case, Case]:
    """Arming and disarming ``n`` hooks with the :class:`HookSession` a run uses (the
    speed-ups', unless HOOKSCOPE_FAST=0); and the plan resolution that ``run()`` does
    before it, shown on its own."""
    m = nn.Sequential(*[nn.Linear(4, 4) for _ in range(n)])
    plan = Plan(capture=[str(i) for i in range(n)])
    layers = plan.resolve(m)

    def arm() -> None:
        with hook_session(m, layers):
            pass

    return (Case("arm_1000", f"HookSession arm + disarm {n} hooks", arm, Target("ms", 5.0),
                 note="enter + exit, plan resolved beforehand"),
            Case("resolve_1000", f"Plan.resolve, {n} layers", lambda: plan.resolve(m),
                 note="paid by every run(); info only"))
