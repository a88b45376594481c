"""Attaching a plan to a model, and taking every hook off again.

:class:`HookSession` is the one owner of every handle it registers. It is a
context manager: on exit (normal, exception, ``KeyboardInterrupt``) it removes
exactly its own hooks, so hooks the user registered on the same modules stay,
in their order. Each hook is an object bound to its own layer path, so there
is no closure-in-a-loop late binding.

Captures are taken per call (a module called three times yields three
records) and detached. A kept tensor is *not* cloned by default: its version
counter is remembered, and :meth:`HookSession.finish` reports the layers whose
captured tensor a later in-place op (``ReLU(inplace=True)``, ``x += y``)
changed. The caller re-runs with ``clone_paths`` naming just those layers, so
only the captures that need a copy pay for one; of those, an eval-mode
BatchNorm's is not copied but computed again from its intact input when first
read (core/capture/victim_remake.py).
"""

from __future__ import annotations

from typing import Any, Iterable

import torch
from torch import nn

from .capture_record import CaptureRecord, _joined
from .head_hooks import add_head_hook
from .hook_handles import HookSet
from ..plan.intervention_base import Intervention, InterventionContext
from ..base.nested import tensor_leaves
from .pending_capture import _Pending, kept_on_cpu
from ..plan.plan import LayerPlan
from .receipts import Tally
from .record_stats import changed_count, stats_range, summarize_shared
from .stats import PendingStats, TensorStats, resolve_all
from .stats_plain import plain_moments, summarize_plain
from .victim_remake import NormStore, Remake, Where, _version, norm_tensors


def summarized_on_read(t: torch.Tensor) -> bool:
    """Whether a kept tensor's statistics wait for the first read (CPU) or are
    computed in :meth:`HookSession.finish` on its device, before the copy to the host."""
    return t.device.type == "cpu"


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
        # The intervention's receipt counts (core/capture/receipts.py); capture-only hooks have none.
        self.tally = session.tallies.get(lp.path) if lp.intervention is not None else None
        site = lp.head_site
        # Heads picked at the output projection's input: a pre-hook there applies it
        # (core/capture/head_hooks.py); this hook only captures.
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


class _RemakeHook(_LayerHook):
    """The hook of a captured in-place victim whose capture is computed again from its
    intact input on first read instead of copied in the forward (core/capture/victim_remake.py).
    Appends ``(hook, call, input, input version)``; anything else takes the copy."""

    __slots__ = ("dtype", "where")

    def __init__(self, session: "HookSession", lp: LayerPlan, at: tuple[torch.dtype, Where]):
        super().__init__(session, lp, clone=True)
        self.dtype, self.where = at  # its copied statistics (see NormStore.add)

    def __call__(self, module: nn.Module, args: Any, output: Any) -> Any:
        if type(output) is torch.Tensor and len(args) == 1:
            x = args[0]
            # Same dtype: autocast did not cast the input for this layer.
            if type(x) is torch.Tensor and x.dtype is output.dtype:
                v = _version(x)
                if v is not None:
                    call = self.calls
                    self.calls += 1
                    # Detached where it has a graph (a forward that needs autograd), so the
                    # record does not keep that graph alive; it shares the version counter.
                    self.session._pending.append((self, call, x.detach() if x.requires_grad else x, v))
                    return None
        return super().__call__(module, args, output)


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
    no_remake
        Layers of ``clone_paths`` to copy even where their capture could be
        computed again from their input on first read (core/capture/victim_remake.py):
        a run found that input changed in place as well.
    """

    def __init__(self, layers: dict[str, LayerPlan], keep_tensors: bool = True,
                 clone_paths: Iterable[str] = (), sources: dict[str, list[Any]] | None = None,
                 baseline: dict[str, list[CaptureRecord]] | None = None,
                 no_remake: Iterable[str] = ()):
        self.layers = layers
        self.keep_tensors = keep_tensors
        self.clone_paths = frozenset(clone_paths)
        self.sources = sources or {}
        self.baseline = baseline or {}
        self.no_remake = frozenset(no_remake)
        self._handles = HookSet()
        self._pre_handles: list[Any] = []  # heads' pre-hooks on output projections
        self._hooks: dict[str, _LayerHook] = {}
        #: Receipt counts of every intervened layer (core/capture/receipts.py), filled by the hooks.
        self.tallies = {p: Tally() for p, lp in layers.items() if lp.intervention is not None}
        # Statistics-only hooks append (path, call, PlainMoments), kept bare tensors
        # (path, call, tensor, version, copied), remade victims (hook, call, input,
        # version), for _laid_out to make _Pending if needed.
        self._pending: list[Any] = []
        self._nested = False  # some capture has more than one tensor leaf
        # No baseline to join: a layer's bare tensor output takes a short path in
        # _record (statistics only: summarize_plain's; kept: the reference alone).
        self._plain_stats = not keep_tensors and not self.baseline
        self._plain_keep = keep_tensors and not self.baseline
        # Kept bare tensors as raw tuples (off for the in-place guard, which watches and
        # replaces a _Pending's kept slot). On ResNet-50's 158 layers, building a _Pending
        # in each hook and a record from it took ~0.5 ms a run, ~1% of its forward.
        self._raw_keep = self._plain_keep
        self._norms = NormStore()  # the statistics of victims remade on first read
        # Remade victims whose input or statistics changed in the forward (see stale_paths):
        # the caller copies them from then on.
        self.remade_stale: set[str] = set()

    # -- lifetime --------------------------------------------------------------
    def __enter__(self) -> "HookSession":
        try:
            clone_paths, sources, hooks, add = (self.clone_paths, self.sources, self._hooks,
                                                self._handles.add)
            for path, lp in self.layers.items():
                hook = self._remake_hook(path, lp) or _LayerHook(
                    self, lp, clone=path in clone_paths, sources=sources.get(path))
                hooks[path] = hook
                add(lp.module, hook)
                if lp.head_site is not None and (lp.head_site.projection is not None
                                                 or lp.head_site.recompute):
                    self._pre_handles.append(add_head_hook(lp, sources.get(path), self.tallies.get(path)))
            self._norms.seal()
        except BaseException:
            self.remove()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.remove()

    def _remake_hook(self, path: str, lp: LayerPlan) -> _RemakeHook | None:
        """A victim's hook that keeps its input instead of copying its output, where the
        capture can be computed again on first read."""
        at = self._remake_at(path, lp) if self._raw_keep and path in self.clone_paths else None
        return _RemakeHook(self, lp, at) if at is not None else None

    def _remake_at(self, path: str, lp: LayerPlan) -> tuple[torch.dtype, Where] | None:
        """Where the copied statistics of ``lp``'s layer will lie (NormStore.add), if its
        capture can be computed again from its input (core/capture/victim_remake.py). Checked
        before our hook is added: another forward hook on the layer, or a global one,
        could change its output."""
        if (path in self.no_remake or not lp.capture or lp.intervention is not None
                or nn.modules.module._global_forward_hooks):
            return None
        norm = norm_tensors(lp.module)
        return self._norms.add(lp.module, norm) if norm is not None else None

    def remove(self) -> None:
        """Remove every hook this session added; safe to call twice.

        Each hook points back at the session, a reference cycle: left in place, a
        dropped session (and what it still holds, e.g. an in-place guard's watched
        captures) waited for the cycle collector instead of going at once. On
        ResNet-50 at batch 8 a first run's 0.7 GiB of captures outlived its result
        that way. Hooks off the model are never called again, so the link goes.
        """
        self._handles.remove()
        while self._pre_handles:
            self._pre_handles.pop().remove()
        for hook in self._hooks.values():
            hook.session = None

    @property
    def active_hooks(self) -> int:
        return len(self._handles) + len(self._pre_handles)

    def calls(self) -> dict[str, int]:
        """How many times each planned layer ran in the forward."""
        return {p: h.calls for p, h in self._hooks.items()}

    # -- recording (called from the hooks) -------------------------------------
    def _baseline_record(self, path: str, call: int) -> CaptureRecord | None:
        recs = self.baseline.get(path)
        return recs[call] if recs is not None and call < len(recs) else None

    def _record(self, hook: _LayerHook, call: int, pre: Any, post: Any) -> None:
        if pre is None and type(post) is torch.Tensor:
            # The common cases, in as few Python steps as they take: every layer pays
            # them inside the forward, where they run cold. A bare tensor with no
            # intervention and no baseline needs no leaf walk and no baseline lookup.
            if self._raw_keep:
                kept, version = self._keep(post, hook.clone)
                self._pending.append((hook.path, call, kept, version, hook.clone))
                return
            if self._plain_keep:
                self._pending.append(self._leaf(hook, call, "", {"": tuple(post.shape)}, post, None, None))
                return
            got = plain_moments(post) if self._plain_stats else None
            if got is not None:  # laid out as a _Pending after the forward (_all_pending)
                self._pending.append((hook.path, call, got))
                return
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

    def _leaf(self, hook: _LayerHook, call: int, leaf: str, shapes: dict, tensor: torch.Tensor | None,
              pre_t: torch.Tensor | None, base: CaptureRecord | None) -> _Pending:
        """The pending capture of one tensor leaf (``tensor``; ``pre_t`` before the intervention)."""
        # Kept tensors are summarised after the forward, not inside it: on the CPU
        # on first read (see CaptureRecord), on an accelerator in finish(), on the
        # device, before the copy to the host.
        lazy = self.keep_tensors and tensor is not None
        rec = _Pending(hook.path, call, leaf, shapes, hook.intervention, lazy, base)
        if not lazy:
            # Statistics only: summarise now, on the device, over one range shared by the
            # values before and after the intervention and the baseline's (see record_stats).
            # A nested output's leaf with its own range (no intervention, no baseline) is
            # binned in the kernel now, as bare outputs are: no sample of it waits in
            # memory. (A bare output here is one the kernel already turned down in _record.)
            alone = (summarize_plain(tensor) if leaf and pre_t is None and base is None
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

    @staticmethod
    def _keep(t: torch.Tensor, clone: bool) -> tuple[torch.Tensor, int | None]:
        # Detached only where it has a graph (a forward that needs autograd). Otherwise
        # the output itself is kept: under no_grad ``detach()`` makes a view with autograd
        # bookkeeping, ~3 us a layer inside the forward (ResNet-50, 158 layers: ~0.5 ms).
        d = t.detach() if t.requires_grad else t
        if clone:
            return d.clone(), None
        return d, _version(d)

    # -- after the forward -----------------------------------------------------
    def _laid_out(self) -> list[_Pending]:
        """``_pending`` with the hooks' raw entries (statistics-only kernel summaries,
        kept bare tensors) made :class:`_Pending`."""
        if self._plain_stats:
            self._pending = [_Pending.of_plain(*r) if type(r) is tuple else r for r in self._pending]
        elif self._raw_keep:
            self._pending = [(r if type(r) is not tuple else _Pending.of_kept(*r) if len(r) == 5
                              # with other kinds of capture: computed now (as a copy would be)
                              else _Pending.of_kept(r[0].path, r[1], self._remade(r).value(r[0].path),
                                                    None, True))
                             for r in self._pending]
        return self._pending

    def _remade(self, entry: tuple[Any, ...]) -> Remake:
        """The recipe of a remade victim's raw entry ``(hook, call, input, version)``."""
        hook, _, x, version = entry
        return Remake(x, version, self._norms.copies()[hook.dtype], hook.where)

    def _remade_pending(self, rec: _Pending) -> Remake:
        """The recipe of a first run's capture whose kept tensor was dropped for a remake."""
        hook, x, version = rec.remake  # type: ignore[misc]
        return self._remade((hook, rec.call, x, version))

    def _all_pending(self) -> list[_Pending]:
        """Every leaf's pending capture: a record's first leaf, then its other leaves."""
        pending = self._laid_out()
        if not self._nested:
            return pending
        return [r for rec in pending for r in (rec, *rec.extra)]

    def stale_paths(self) -> set[str]:
        """Layers whose kept tensor was changed in place after it was captured."""
        stale = set()
        norms_changed = self._norms.changed()  # then no remade victim's capture is right
        for entry in self._pending:
            if type(entry) is tuple:  # a raw entry: (path, call, tensor, version, copied) if kept
                # A version was taken, so the tensor has a counter: read it without _version.
                if len(entry) == 5 and entry[3] is not None and entry[2]._version != entry[3]:
                    stale.add(entry[0])
                elif len(entry) == 4 and (norms_changed or _version(entry[2]) != entry[3]):
                    stale.add(entry[0].path)  # a remade victim's input or statistics changed
                    self.remade_stale.add(entry[0].path)
                continue
            if entry.remake is not None and entry.kept is None and (
                    norms_changed or _version(entry.remake[1]) != entry.remake[2]):
                stale.add(entry.path)  # as above, for the first run's remade victims
                self.remade_stale.add(entry.path)
            for rec in (entry, *entry.extra):
                for kept in (rec.kept, rec.pre_kept):
                    if kept is not None and kept[1] is not None and _version(kept[0]) != kept[1]:
                        stale.add(rec.path)
        return stale

    def finish(self) -> dict[str, list[CaptureRecord]]:
        """Resolve statistics (one transfer per device) and move kept tensors to the CPU."""
        if self._plain_stats and all(type(r) is tuple for r in self._pending):
            return self._finish_plain()
        if self._plain_keep and all(kept_on_cpu(r) for r in self._pending):
            return self._finish_kept()
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
            if rec.remake is not None and rec.kept is None:  # dropped for a remake (see _Pending)
                record._remake = self._remade_pending(rec)
            if rec.extra:
                record.extra_leaves = tuple(built(e) for e in rec.extra)
            out[rec.path].append(record)
        self._pending.clear()
        self._nested = False
        return out

    def _finish_plain(self) -> dict[str, list[CaptureRecord]]:
        """:meth:`finish` where every capture is a kernel summary (statistics only, bare
        tensors, no intervention): nothing to join, copy or transfer, so each record is
        built straight from its numbers (see CaptureRecord.of_kernel)."""
        out: dict[str, list[CaptureRecord]] = {p: [] for p, lp in self.layers.items() if lp.capture}
        for path, call, got in self._pending:  # all tuples (see finish)
            out[path].append(CaptureRecord.of_kernel(path, call, got))
        self._pending.clear()
        return out

    def _finish_kept(self) -> dict[str, list[CaptureRecord]]:
        """:meth:`finish` where every capture is a kept bare tensor on the CPU (no
        intervention, no baseline): summarised on first read, nothing to copy or join,
        so each record is built straight from its tensor (see CaptureRecord.of_kept)."""
        out: dict[str, list[CaptureRecord]] = {p: [] for p, lp in self.layers.items() if lp.capture}
        for entry in self._pending:  # see kept_on_cpu
            if type(entry) is _Pending:  # the first run's (the in-place guard watched it)
                if entry.kept is not None:
                    out[entry.path].append(CaptureRecord.of_kept(entry.path, entry.call,
                                                                 entry.kept[0], entry.copied))
                else:  # dropped for a remake (see _Pending)
                    out[entry.path].append(CaptureRecord.of_remade(entry.path, entry.call,
                                                                   self._remade_pending(entry)))
            elif len(entry) == 5:
                path, call, tensor, _, copied = entry
                out[path].append(CaptureRecord.of_kept(path, call, tensor, copied))
            else:  # a remade victim: (hook, call, input, version)
                out[entry[0].path].append(CaptureRecord.of_remade(entry[0].path, entry[1],
                                                                   self._remade(entry)))
        self._pending.clear()
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
