"""The speed-ups' hook session: :class:`FastSession`, the reference
:class:`~hookscope.core.engine.hooks.HookSession` with shorter routes.

What it changes, each giving the records the reference path gives:

* hooks are armed by writing torch's hook dicts (:mod:`.hook_dicts`);
* a bare tensor output (no intervention, no baseline to join) is kept as a raw
  tuple, and a statistics-only one is summarised by the compiled kernel inside
  the hook (:mod:`.stats_plain`); records are built from them straight after
  the forward (``CaptureRecord.of_kept``/``of_stats``), not through the general
  :class:`~hookscope.core.engine.pending_capture._Pending` walk. On ResNet-50's
  158 layers, building a ``_Pending`` in each hook and a record from it took
  ~0.5 ms a run, ~1% of its forward; with every layer summarised, each line of
  Python a hook runs inside the forward costs several times what it costs after it;
* a known in-place victim that is an eval-mode BatchNorm keeps its input, not a
  copy of its output, and its capture is computed again on first read
  (:mod:`.victim_remake`).
"""

from __future__ import annotations

from typing import Any, Iterable

import torch
from torch import nn

from ..engine.capture_record import CaptureRecord
from ..engine.hook_handles import Arming
from ..engine.hooks import HookSession, _LayerHook, version_of
from ..engine.pending_capture import _Pending
from ..plan.plan import LayerPlan
from .hook_dicts import HookSet
from .stats_plain import PlainMoments, plain_moments, plain_pending, summarize_plain
from .victim_remake import NormStore, Remake, Where, norm_tensors


class FastPending(_Pending):
    """A :class:`_Pending` that may be computed again from its input instead of kept."""

    __slots__ = ("remake",)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # (hook, input, input version) of a capture that can be computed again from its
        # input (victim_remake.py); it is, once ``kept`` is dropped for it (the first
        # run's in-place guard does that instead of copying).
        self.remake: tuple[Any, torch.Tensor, int] | None = None

    @classmethod
    def of_plain(cls, path: str, call: int, got: PlainMoments) -> "FastPending":
        """The pending capture of a statistics-only hook's kernel summary."""
        rec = cls(path, call, "", {"": got[0]}, None, False, None)
        rec.stats = plain_pending(got)
        return rec


class _KernelStats:
    """A kernel summary of the forward, laid out as a PendingStats when first read
    (``CaptureRecord.of_stats``)."""

    __slots__ = ("got",)

    def __init__(self, got: PlainMoments) -> None:
        self.got = got

    @property
    def shape(self) -> tuple[int, ...]:
        return self.got[0]

    def resolve(self) -> Any:
        return plain_pending(self.got).resolve()


def kept_on_cpu(entry: Any) -> bool:
    """Whether a pending entry is a bare tensor kept on the CPU, to be read as it is
    (:meth:`FastSession._finish_kept`): a raw entry, or a first run's :class:`FastPending`
    with no intervention, no other leaf and no baseline, kept or to be remade."""
    if type(entry) is tuple:
        return len(entry) != 3 and entry[2].is_cpu  # (3: a statistics-only kernel summary)
    return (entry.intervention is None and not entry.extra and entry.pre_kept is None
            and entry.baseline is None and entry.lazy
            and (entry.kept[0].is_cpu if entry.kept is not None else entry.remake is not None))


class _RemakeHook(_LayerHook):
    """The hook of a captured in-place victim whose capture is computed again from its
    intact input on first read instead of copied in the forward (victim_remake.py).
    Appends ``(hook, call, input, input version)``; anything else takes the copy."""

    __slots__ = ("dtype", "where")

    def __init__(self, session: "FastSession", lp: LayerPlan, at: tuple[torch.dtype, Where]):
        super().__init__(session, lp, clone=True)
        self.dtype, self.where = at  # its copied statistics (see NormStore.add)

    def __call__(self, module: nn.Module, args: Any, output: Any) -> Any:
        if type(output) is torch.Tensor and len(args) == 1:
            x = args[0]
            # Same dtype: autocast did not cast the input for this layer.
            if type(x) is torch.Tensor and x.dtype is output.dtype:
                v = version_of(x)
                if v is not None:
                    call = self.calls
                    self.calls += 1
                    # Detached where it has a graph (a forward that needs autograd), so the
                    # record does not keep that graph alive; it shares the version counter.
                    self.session._pending.append((self, call, x.detach() if x.requires_grad else x, v))
                    return None
        return super().__call__(module, args, output)


class FastSession(HookSession):
    """:class:`HookSession` with the short routes of the module docstring.

    ``no_remake``: layers of ``clone_paths`` to copy even where their capture could be
    computed again from their input on first read: a run found that input changed in
    place as well.
    """

    _new_pending = FastPending

    def __init__(self, layers: dict[str, LayerPlan], keep_tensors: bool = True,
                 clone_paths: Iterable[str] = (), sources: dict[str, list[Any]] | None = None,
                 baseline: dict[str, list[CaptureRecord]] | None = None,
                 no_remake: Iterable[str] = ()):
        super().__init__(layers, keep_tensors, clone_paths, sources, baseline)
        self.no_remake = frozenset(no_remake)
        # Hooks append, besides _Pending: statistics-only kernel summaries (path, call,
        # PlainMoments), kept bare tensors (path, call, tensor, version, copied), remade
        # victims (hook, call, input, version); _laid_out makes them _Pending if needed.
        # No baseline to join: a layer's bare tensor output takes a short path in
        # _record (statistics only: the kernel's; kept: the reference alone).
        self._plain_stats = not keep_tensors and not self.baseline
        self._plain_keep = keep_tensors and not self.baseline
        # Kept bare tensors as raw tuples (off for the in-place guard, which watches and
        # replaces a _Pending's kept slot).
        self._raw_keep = self._plain_keep
        self._norms = NormStore()  # the statistics of victims remade on first read
        # Remade victims whose input or statistics changed in the forward (see stale_paths):
        # copied from then on (ModelMemory.no_remake).
        self.remade_stale: set[str] = set()

    def _arming(self) -> Arming:
        return HookSet()

    def _hook_for(self, path: str, lp: LayerPlan) -> _LayerHook:
        at = self._remake_at(path, lp) if self._raw_keep and path in self.clone_paths else None
        return _RemakeHook(self, lp, at) if at is not None else super()._hook_for(path, lp)

    def __enter__(self) -> "FastSession":
        super().__enter__()
        self._norms.seal()
        return self

    def learned(self, memory: Any) -> None:
        memory.no_remake |= self.remade_stale

    def _remake_at(self, path: str, lp: LayerPlan) -> tuple[torch.dtype, Where] | None:
        """Where the copied statistics of ``lp``'s layer will lie (NormStore.add), if its
        capture can be computed again from its input (victim_remake.py). Checked
        before our hook is added: another forward hook on the layer, or a global one,
        could change its output."""
        if (path in self.no_remake or not lp.capture or lp.intervention is not None
                or lp.at_input or lp.mid_block is not None
                or nn.modules.module._global_forward_hooks):
            return None
        norm = norm_tensors(lp.module)
        return self._norms.add(lp.module, norm) if norm is not None else None

    # -- recording ---------------------------------------------------------------
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
            if got is not None:  # laid out as a _Pending after the forward (_laid_out)
                self._pending.append((hook.path, call, got))
                return
        super()._record(hook, call, pre, post)

    def _summary_alone(self, tensor: torch.Tensor) -> Any:
        # Binned in the kernel now, as bare outputs are: no sample of it waits in memory.
        return summarize_plain(tensor)

    # -- after the forward -------------------------------------------------------
    def _laid_out(self) -> list[_Pending]:
        if self._plain_stats:
            self._pending = [FastPending.of_plain(*r) if type(r) is tuple else r for r in self._pending]
        elif self._raw_keep:
            self._pending = [(r if type(r) is not tuple else FastPending.of_kept(*r) if len(r) == 5
                              # with other kinds of capture: computed now (as a copy would be)
                              else FastPending.of_kept(r[0].path, r[1], self._remade(r).value(r[0].path),
                                                       None, True))
                             for r in self._pending]
        return self._pending

    def _remade(self, entry: tuple[Any, ...]) -> Remake:
        """The recipe of a remade victim's raw entry ``(hook, call, input, version)``."""
        hook, _, x, version = entry
        return Remake(x, version, self._norms.copies()[hook.dtype], hook.where)

    def _remade_pending(self, rec: FastPending) -> Remake:
        """The recipe of a first run's capture whose kept tensor was dropped for a remake."""
        hook, x, version = rec.remake  # type: ignore[misc]
        return self._remade((hook, rec.call, x, version))

    def stale_paths(self) -> set[str]:
        stale = set()
        norms_changed = self._norms.changed()  # then no remade victim's capture is right
        rest = []
        for entry in self._pending:
            if type(entry) is tuple:  # a raw entry: (path, call, tensor, version, copied) if kept
                # A version was taken, so the tensor has a counter: read it without version_of.
                if len(entry) == 5 and entry[3] is not None and entry[2]._version != entry[3]:
                    stale.add(entry[0])
                elif len(entry) == 4 and (norms_changed or version_of(entry[2]) != entry[3]):
                    stale.add(entry[0].path)  # a remade victim's input or statistics changed
                    self.remade_stale.add(entry[0].path)
                continue
            if entry.remake is not None and entry.kept is None and (
                    norms_changed or version_of(entry.remake[1]) != entry.remake[2]):
                stale.add(entry.path)  # as above, for the first run's remade victims
                self.remade_stale.add(entry.path)
            rest.append(entry)
        for entry in rest:
            for rec in (entry, *entry.extra):
                for kept in (rec.kept, rec.pre_kept):
                    if kept is not None and kept[1] is not None and version_of(kept[0]) != kept[1]:
                        stale.add(rec.path)
        return stale

    def _finished(self, rec: _Pending, record: CaptureRecord) -> None:
        if type(rec) is FastPending and rec.remake is not None and rec.kept is None:
            record._remake = self._remade_pending(rec)  # dropped for a remake (see FastPending)

    def finish(self) -> dict[str, list[CaptureRecord]]:
        if self._plain_stats and all(type(r) is tuple for r in self._pending):
            return self._finish_plain()
        if self._plain_keep and all(kept_on_cpu(r) for r in self._pending):
            return self._finish_kept()
        return super().finish()

    def _finish_plain(self) -> dict[str, list[CaptureRecord]]:
        """:meth:`finish` where every capture is a kernel summary (statistics only, bare
        tensors, no intervention): nothing to join, copy or transfer, so each record is
        built straight from its numbers (see CaptureRecord.of_stats)."""
        out: dict[str, list[CaptureRecord]] = {p: [] for p, lp in self.layers.items() if lp.capture}
        for path, call, got in self._pending:  # all tuples (see finish)
            out[path].append(CaptureRecord.of_stats(path, call, _KernelStats(got)))
        self._pending.clear()
        return out

    def _finish_kept(self) -> dict[str, list[CaptureRecord]]:
        """:meth:`finish` where every capture is a kept bare tensor on the CPU (no
        intervention, no baseline): summarised on first read, nothing to copy or join,
        so each record is built straight from its tensor (see CaptureRecord.of_kept)."""
        out: dict[str, list[CaptureRecord]] = {p: [] for p, lp in self.layers.items() if lp.capture}
        for entry in self._pending:  # see kept_on_cpu
            if type(entry) is FastPending:  # the first run's (the in-place guard watched it)
                if entry.kept is not None:
                    out[entry.path].append(CaptureRecord.of_kept(entry.path, entry.call,
                                                                 entry.kept[0], entry.copied))
                else:  # dropped for a remake (see FastPending)
                    out[entry.path].append(CaptureRecord.of_recipe(entry.path, entry.call,
                                                                   self._remade_pending(entry)))
            elif len(entry) == 5:
                path, call, tensor, _, copied = entry
                out[path].append(CaptureRecord.of_kept(path, call, tensor, copied))
            else:  # a remade victim: (hook, call, input, version)
                out[entry[0].path].append(CaptureRecord.of_recipe(entry[0].path, entry[1],
                                                                   self._remade(entry)))
        self._pending.clear()
        return out
