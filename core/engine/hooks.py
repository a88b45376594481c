"""Attaching a plan to a model, and taking every hook off again.

:class:`HookSession` is the one owner of every handle it registers. It is a
context manager: on exit (normal, exception, ``KeyboardInterrupt``) it removes
exactly its own hooks, so hooks the user registered on the same modules stay,
in their order. Each hook is an object bound to its own layer path, so there
is no closure-in-a-loop late binding.

Captures are taken per call (a module called three times yields three
records) and detached. A kept tensor is *not* cloned by default: its version
counter is remembered, and :meth:`HookSession.stale_paths` reports the layers
whose captured tensor a later in-place op (``ReLU(inplace=True)``, ``x += y``)
changed. The caller re-runs with ``clone_paths`` naming just those layers, so
only the captures that need a copy pay for one.

This is the reference path. ``hookscope.core.fast`` subclasses it (through
:mod:`.fast_slot`) to arm hooks, keep captures and learn victims more cheaply;
the methods it overrides are marked as such.
"""

from __future__ import annotations

import contextlib
from typing import Any, ContextManager, Iterable

import torch
from torch import nn

from .capture_record import CaptureRecord, _joined
from .head_hooks import add_head_hook
from .hook_handles import Arming, HandleStack, add_layer_hook
from ..plan.intervention_base import Intervention, InterventionContext
from ..base.nested import tensor_leaves
from .pending_capture import _Pending
from ..plan.plan import LayerPlan
from .receipts import Tally
from .record_stats import changed_count, stats_range, summarize_shared
from .stats import PendingStats, TensorStats, resolve_all


def summarized_on_read(t: torch.Tensor) -> bool:
    """Whether a kept tensor's statistics wait for the first read (CPU) or are
    computed in :meth:`HookSession.finish` on its device, before the copy to the host."""
    return t.device.type == "cpu"


def version_of(t: torch.Tensor) -> int | None:
    """``t``'s version counter, or None (inference tensors keep none)."""
    try:
        return t._version
    except RuntimeError:
        return None


class _LayerHook:
    """The forward hook of one layer; knows its own path (no late binding)."""

    __slots__ = ("session", "path", "module", "capture", "intervention", "clone", "calls", "sources",
                 "tally", "here", "n_heads")

    def __init__(self, session: "HookSession", lp: LayerPlan, clone: bool,
                 sources: list[Any] | None = None):
        self.session: Any = session  # None once removed (see HookSession.remove)
        self.path = lp.path
        self.module = lp.module
        self.capture = lp.capture
        self.intervention: Intervention | None = lp.intervention
        self.clone = clone
        self.calls = 0
        self.sources = sources  # this layer's outputs on the pre-pass input, per call
        # The intervention's receipt counts (core/engine/receipts.py); capture-only hooks have none.
        self.tally = session.tallies.get(lp.path) if lp.intervention is not None else None
        site = lp.head_site
        # Heads picked at the output projection's input: a pre-hook there applies it
        # (core/engine/head_hooks.py); this hook only captures.
        self.here = site is None or (site.projection is None and not site.recompute)
        self.n_heads = None if site is None else site.n_heads

    def __call__(self, module: nn.Module, args: Any, output: Any) -> Any:
        call = self.calls
        self.calls += 1
        iv = self.intervention
        if iv is None or not self.here:
            if self.capture:
                self.session._record(self, call, None, output)
            return None
        src = self.sources[call] if self.sources is not None and call < len(self.sources) else None
        new = iv.apply(output, InterventionContext(self.path, call, module, src, n_heads=self.n_heads))
        if self.tally is not None:
            self.tally.add(output, new)
        if self.capture:
            self.session._record(self, call, output, new)
        return new


class HookSession:
    """Registers a resolved plan's hooks on enter and removes them on exit.

    Parameters
    ----------
    layers
        ``{path: LayerPlan}`` from :meth:`Plan.resolve`.
    keep_tensors
        Keep captured tensors, not only their statistics.
    clone_paths
        Layers whose kept tensors are copied at capture time because a later
        in-place op is known to overwrite them.
    sources
        ``{path: [output per call]}`` of a pre-pass on a source/reference input,
        handed to those layers' interventions as ``ctx.source``.
    baseline
        The baseline run's captures: each record of this run gets the same
        call's baseline tensor and statistics, binned over a shared range.
    """

    #: Whether this session watches its forward for in-place victims (a speed-up's).
    learning = False

    def __init__(self, layers: dict[str, LayerPlan], keep_tensors: bool = True,
                 clone_paths: Iterable[str] = (), sources: dict[str, list[Any]] | None = None,
                 baseline: dict[str, list[CaptureRecord]] | None = None):
        self.layers = layers
        self.keep_tensors = keep_tensors
        self.clone_paths = frozenset(clone_paths)
        self.sources = sources or {}
        self.baseline = baseline or {}
        self._handles = self._arming()
        self._hooks: dict[str, _LayerHook] = {}
        #: Receipt counts of every intervened layer (core/engine/receipts.py), filled by the hooks.
        self.tallies = {p: Tally() for p, lp in layers.items() if lp.intervention is not None}
        self._pending: list[Any] = []  # one _Pending per captured call (a subclass adds its own kinds)
        self._nested = False  # some capture has more than one tensor leaf

    # -- lifetime --------------------------------------------------------------
    def _arming(self) -> Arming:
        """What registers and removes the hooks (a speed-up overrides it)."""
        return HandleStack()

    def _hook_for(self, path: str, lp: LayerPlan) -> _LayerHook:
        """The forward hook of one layer (a speed-up overrides it)."""
        return _LayerHook(self, lp, clone=path in self.clone_paths, sources=self.sources.get(path))

    def __enter__(self) -> "HookSession":
        try:
            hooks, handles = self._hooks, self._handles
            for path, lp in self.layers.items():
                hook = hooks[path] = self._hook_for(path, lp)
                add_layer_hook(handles, lp, hook)
                if lp.head_site is not None and (lp.head_site.projection is not None
                                                 or lp.head_site.recompute):
                    add_head_hook(handles, lp, self.sources.get(path), self.tallies.get(path))
        except BaseException:
            self.remove()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.remove()

    def watching(self, module: nn.Module, modules: list[nn.Module] | None) -> ContextManager[Any]:
        """What the forward runs inside, besides the hooks (a speed-up's in-place guard);
        nothing on the reference path."""
        return contextlib.nullcontext()

    def learned(self, memory: Any) -> None:
        """Put what this forward learned about the model into ``memory`` (a
        :class:`~hookscope.core.model.learned.ModelMemory`); the reference path's
        victims are the caller's, from :meth:`stale_paths`."""

    def remove(self) -> None:
        """Remove every hook this session added; safe to call twice.

        Each hook points back at the session, a reference cycle: left in place, a
        dropped session (and what it still holds) waited for the cycle collector
        instead of going at once. On ResNet-50 at batch 8 a first run's 0.7 GiB of
        captures outlived its result that way. Hooks off the model are never called
        again, so the link goes (even when removing a hook raised).
        """
        try:
            self._handles.remove()
        finally:
            for hook in self._hooks.values():
                hook.session = None

    @property
    def active_hooks(self) -> int:
        return len(self._handles)

    def calls(self) -> dict[str, int]:
        """How many times each planned layer ran in the forward."""
        return {p: h.calls for p, h in self._hooks.items()}

    # -- recording (called from the hooks) -------------------------------------
    def _baseline_record(self, path: str, call: int) -> CaptureRecord | None:
        recs = self.baseline.get(path)
        return recs[call] if recs is not None and call < len(recs) else None

    def _record(self, hook: _LayerHook, call: int, pre: Any, post: Any) -> None:
        """Take one call's capture: every tensor leaf of ``post`` (``pre``: the output
        before the layer's intervention). A speed-up overrides it for its short cases."""
        leaves = tensor_leaves(post)
        shapes = {k: tuple(t.shape) for k, t in leaves}
        leaf, tensor = leaves[0] if leaves else ("", None)
        base = self._baseline_record(hook.path, call)
        pre_by = dict(tensor_leaves(pre)) if pre is not None else None
        rec = self._leaf(hook, call, leaf, shapes, tensor,
                         pre_by.get(leaf) if pre_by is not None else None, base)
        if len(leaves) > 1:  # a nested output: every other tensor leaf gets its own summary
            rec.extra = tuple(
                self._leaf(hook, call, name, shapes, t, pre_by.get(name) if pre_by is not None
                           else None, base.leaf_record(name) if base is not None else None)
                for name, t in leaves[1:])
            self._nested = True
        self._pending.append(rec)

    def _summary_alone(self, tensor: torch.Tensor) -> PendingStats | None:
        """A statistics-only summary of a nested output's leaf with its own range, taken
        in the forward where a speed-up can (None: :func:`summarize_shared` does it)."""
        return None

    def _leaf(self, hook: _LayerHook, call: int, leaf: str, shapes: dict, tensor: torch.Tensor | None,
              pre_t: torch.Tensor | None, base: CaptureRecord | None) -> _Pending:
        """The pending capture of one tensor leaf (``tensor``; ``pre_t`` before the intervention)."""
        # Kept tensors are summarised after the forward, not inside it: on the CPU
        # on first read (see CaptureRecord), on an accelerator in finish(), on the
        # device, before the copy to the host.
        lazy = self.keep_tensors and tensor is not None
        rec = self._new_pending(hook.path, call, leaf, shapes, hook.intervention, lazy, base)
        if not lazy:
            # Statistics only: summarise now, on the device, over one range shared by the
            # values before and after the intervention and the baseline's (see record_stats).
            alone = (self._summary_alone(tensor) if leaf and pre_t is None and base is None
                     and tensor is not None else None)
            extra = [stats_range(base.stats)] if base is not None else []
            rec.pre_stats, rec.stats = ((None, alone) if alone is not None
                                        else summarize_shared([pre_t, tensor], extra))
            if pre_t is not None and tensor is not None:
                rec.changed = changed_count(pre_t, tensor)
        if self.keep_tensors:
            if pre_t is not None:
                rec.pre_kept = self._keep(pre_t, hook.clone)
            if tensor is not None:
                rec.kept = self._keep(tensor, hook.clone)
                rec.copied = hook.clone
        return rec

    #: The pending capture's class (a speed-up's carries more).
    _new_pending = _Pending

    @staticmethod
    def _keep(t: torch.Tensor, clone: bool) -> tuple[torch.Tensor, int | None]:
        # Detached only where it has a graph (a forward that needs autograd). Otherwise
        # the output itself is kept: under no_grad ``detach()`` makes a view with autograd
        # bookkeeping, ~3 us a layer inside the forward (ResNet-50, 158 layers: ~0.5 ms).
        d = t.detach() if t.requires_grad else t
        if clone:
            return d.clone(), None
        return d, version_of(d)

    # -- after the forward -----------------------------------------------------
    def _laid_out(self) -> list[_Pending]:
        """``_pending`` as :class:`_Pending` only (a speed-up lays out its own entries)."""
        return self._pending

    def _all_pending(self) -> list[_Pending]:
        """Every leaf's pending capture: a record's first leaf, then its other leaves."""
        pending = self._laid_out()
        if not self._nested:
            return pending
        return [r for rec in pending for r in (rec, *rec.extra)]

    def stale_paths(self) -> set[str]:
        """Layers whose kept tensor was changed in place after it was captured."""
        stale = set()
        for entry in self._laid_out():
            for rec in (entry, *entry.extra):
                for kept in (rec.kept, rec.pre_kept):
                    if kept is not None and kept[1] is not None and version_of(kept[0]) != kept[1]:
                        stale.add(rec.path)
        return stale

    def _finished(self, rec: _Pending, record: CaptureRecord) -> None:
        """``record`` was built from ``rec`` (a speed-up completes its own kinds)."""

    def finish(self) -> dict[str, list[CaptureRecord]]:
        """Resolve statistics (one transfer per device) and move kept tensors to the CPU."""
        pending = self._all_pending()
        for rec in pending:
            if rec.lazy and rec.kept is not None and not summarized_on_read(rec.kept[0]):
                pre_t = rec.pre_kept[0] if rec.pre_kept is not None else None
                extra = [stats_range(rec.baseline.stats)] if rec.baseline is not None else []
                rec.pre_stats, rec.stats = summarize_shared([pre_t, rec.kept[0]], extra)
                if pre_t is not None:
                    rec.changed = changed_count(pre_t, rec.kept[0])
                rec.lazy = False
        # CPU summaries keep their histogram unbinned until a record is read: binning a
        # sample costs more than its layer's reductions, and a caller reads a few layers.
        resolve_all((s for rec in pending for s in (rec.stats, rec.pre_stats) if s is not None),
                    bin_histograms=False)
        counts = [rec.changed for rec in pending if rec.changed is not None]
        host_counts = iter(torch.stack(counts).cpu().tolist()) if counts else iter(())
        tensors = [k[0] for rec in pending for k in (rec.kept, rec.pre_kept) if k is not None]
        host = dict(zip(map(id, tensors), to_host(tensors)))
        out: dict[str, list[CaptureRecord]] = {p: [] for p, lp in self.layers.items() if lp.capture}

        def built(rec: _Pending) -> CaptureRecord:
            changed = next(host_counts) if rec.changed is not None else None
            stats: TensorStats | PendingStats | None
            pre: TensorStats | PendingStats | None
            if rec.lazy:
                stats, pre = None, None
            elif changed is None:  # nothing to join: resolved, or binned on first read
                stats, pre = rec.stats, rec.pre_stats
            else:
                stats, pre = _joined(rec.stats, rec.pre_stats, changed)
            base = rec.baseline
            base_kept = base.tensor if base is not None else None
            return CaptureRecord(
                path=rec.path,
                call=rec.call,
                stats=stats,
                tensor=host[id(rec.kept[0])] if rec.kept is not None else None,
                leaf=rec.leaf,
                leaf_shapes=rec.leaf_shapes,
                intervention=rec.intervention,
                pre_stats=pre,
                pre_tensor=host[id(rec.pre_kept[0])] if rec.pre_kept is not None else None,
                copied=rec.copied,
                lazy=rec.lazy,
                baseline_tensor=base_kept,
                # Not kept (statistics only): the baseline's own summary. Kept: binned with
                # this record, when first read.
                baseline_stats=base.stats if base is not None and base_kept is None else None,
            )

        for rec in self._laid_out():  # in the order of ``pending``: the counts come in that order
            record = built(rec)
            self._finished(rec, record)
            if rec.extra:
                record.extra_leaves = tuple(built(e) for e in rec.extra)
            out[rec.path].append(record)
        self._pending.clear()
        self._nested = False
        return out


def to_host(tensors: list[torch.Tensor]) -> list[torch.Tensor]:
    """Copy tensors to the CPU; device copies go to pinned memory without blocking,
    with one synchronisation at the end."""
    out: list[torch.Tensor] = []
    devices = set()
    for t in tensors:
        if t.device.type == "cpu":
            out.append(t)
            continue
        dst = torch.empty(t.shape, dtype=t.dtype, pin_memory=torch.cuda.is_available())
        dst.copy_(t, non_blocking=True)
        devices.add(t.device)
        out.append(dst)
    for d in devices:
        if d.type == "cuda":
            torch.cuda.synchronize(d)
    return out
