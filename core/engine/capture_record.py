"""What a run gives back for one call of one captured layer: :class:`CaptureRecord`.

Its statistics are resolved when first read (see the class); :func:`resolve_records`
resolves them all at once, e.g. on a worker before a window reads them.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Protocol

import torch

from ..plan.intervention_base import Intervention
from .record_stats import changed_count, fraction, stats_range, summarize_shared
from .stats import PendingStats, TensorStats, summarize


class Recipe(Protocol):
    """How to compute a capture's tensor when first read, instead of keeping it
    (``hookscope.core.fast`` remakes some in-place victims this way)."""

    x: torch.Tensor  # what it is computed from; its shape is the capture's

    @property
    def nbytes(self) -> int: ...
    def value(self, path: str) -> torch.Tensor: ...


class LazyStats(Protocol):
    """A summary laid out when first read (a :class:`PendingStats`, or a speed-up's own)."""

    @property
    def shape(self) -> tuple[int, ...]: ...

    def resolve(self) -> TensorStats: ...


@dataclass(frozen=True)
class ModelPair:
    """What a record's two values are when it compares two models rather than a run
    without and with the interventions: ``baseline_tensor`` is model A's output,
    ``tensor`` model B's (each after the plan's interventions, which apply to both).
    ``a``/``b`` name the models in words (their specs, weights, dtype, device);
    ``max_abs_diff``, ``relative_change`` (``||b - a|| / ||a||``) and ``cosine`` say how
    far apart they are, as a model diff's row does."""

    a: str
    b: str
    max_abs_diff: float
    relative_change: float
    cosine: float | None = None


class CaptureRecord:
    """One call of one captured layer.

    ``tensor`` is the layer's output as the rest of the model saw it (after
    the intervention, if the layer has one), detached and on the CPU, or
    ``None`` in statistics-only mode. ``pre_tensor``/``pre_stats`` hold the
    value before the intervention. ``baseline_tensor``/``baseline_stats``
    hold the same call in the baseline run (no interventions) of a
    :func:`~hookscope.core.compare`. For a nested output (an attention block's
    ``(hidden, weights)``, an LSTM's ``(out, (h, c))``, a ``ModelOutput``, a
    detector's dicts) the record itself is the first tensor leaf, ``leaf`` its
    name (``"[0]"``, ``".last_hidden_state"``), and ``extra_leaves`` holds one
    record per other tensor leaf (same path, call and intervention; its own
    ``leaf``, tensors and statistics, baseline included); ``leaf_shapes`` lists
    every leaf's shape. A single-tensor output has no extra leaves. ``copied``
    says the capture had to be copied because a later in-place op overwrites
    the layer's output. ``intervention`` is the
    layer's intervention in words (``intervention_obj`` the object), or ``None``.

    The histograms of the versions a record has (baseline, before, after)
    share one range, so they compare bin by bin (in statistics-only mode the
    baseline keeps its own bins: its values are gone when the intervened run
    is summarised; the intervened run's range spans it). ``stats.fraction_changed``
    is the fraction of values the intervention changed, for every kind.

    Statistics of tensors kept on the CPU are computed when first read,
    outside the forward pass: capturing every layer then costs what keeping
    references costs, and a caller that looks at a few layers pays for those
    few. Off the CPU, and in statistics-only mode, they are computed in the
    forward on the tensor's device.
    """

    __slots__ = ("path", "call", "_tensor", "_remake", "leaf", "_leaf_shapes", "intervention", "intervention_obj",
                 "pre_tensor", "baseline_tensor", "copied", "_stats", "_pre_stats", "_baseline_stats",
                 "_lazy", "extra_leaves", "_same_base", "pair")

    def __init__(self, path: str, call: int, stats: "TensorStats | PendingStats | None" = None,
                 tensor: torch.Tensor | None = None, leaf: str = "",
                 leaf_shapes: dict[str, tuple[int, ...]] | None = None,
                 intervention: "str | Intervention | None" = None,
                 pre_stats: "TensorStats | PendingStats | None" = None,
                 pre_tensor: torch.Tensor | None = None, copied: bool = False, lazy: bool = False,
                 baseline_tensor: torch.Tensor | None = None,
                 baseline_stats: TensorStats | None = None,
                 extra_leaves: "tuple[CaptureRecord, ...]" = (), pair: ModelPair | None = None):
        self.path = path
        self.call = call
        self._remake: Recipe | None = None
        self._tensor = tensor
        self.leaf = leaf
        self._leaf_shapes: dict[str, tuple[int, ...]] | None = leaf_shapes or {}
        self.intervention_obj = intervention if isinstance(intervention, Intervention) else None
        self.intervention = (intervention.describe() if isinstance(intervention, Intervention)
                             else intervention)
        self.pre_tensor = pre_tensor
        self.baseline_tensor = baseline_tensor
        self.copied = copied
        # A PendingStats (statistics only, on the CPU) holds the scalars; its histogram
        # is binned when first read (see the stats property).
        self._stats: TensorStats | LazyStats | None = stats
        self._pre_stats: TensorStats | PendingStats | None = pre_stats
        self._baseline_stats = baseline_stats
        self._lazy = lazy
        self.extra_leaves = extra_leaves
        self._same_base: tuple[torch.Tensor, torch.Tensor, bool] | None = None  # matches_baseline
        self.pair = pair

    @classmethod
    def of_stats(cls, path: str, call: int, stats: LazyStats) -> "CaptureRecord":
        """The record of a statistics-only call of a bare tensor (no intervention, no
        baseline), as ``CaptureRecord(path, call, stats, leaf_shapes={"": stats.shape})``
        would build it. Every slot is set here directly and ``stats`` is resolved when
        first read: a run builds one per layer call right after the forward (tests
        check it against ``__init__``)."""
        rec = object.__new__(cls)
        rec.path, rec.call, rec._tensor, rec._remake, rec.leaf = path, call, None, None, ""
        rec._leaf_shapes = {"": stats.shape}
        rec.intervention_obj = rec.intervention = None
        rec.pre_tensor = rec.baseline_tensor = None
        rec.copied = rec._lazy = False
        rec._stats, rec._pre_stats, rec._baseline_stats = stats, None, None  # type: ignore[assignment]
        rec.extra_leaves = ()
        rec._same_base = rec.pair = None
        return rec

    @classmethod
    def of_kept(cls, path: str, call: int, tensor: torch.Tensor, copied: bool) -> "CaptureRecord":
        """The record of a kept bare tensor on the CPU (no intervention, no baseline),
        summarised on first read, as ``CaptureRecord(path, call, tensor=tensor,
        leaf_shapes={"": shape}, copied=copied, lazy=True)`` would build it; every slot
        set directly (a run builds one per layer call; tests check it against ``__init__``)."""
        rec = object.__new__(cls)
        rec.path, rec.call, rec._tensor, rec._remake, rec.leaf = path, call, tensor, None, ""
        rec._leaf_shapes = None  # {"": its shape}, made when asked (see leaf_shapes)
        rec.intervention_obj = rec.intervention = None
        rec.pre_tensor = rec.baseline_tensor = None
        rec.copied, rec._lazy = copied, True
        rec._stats = rec._pre_stats = rec._baseline_stats = None
        rec.extra_leaves = ()
        rec._same_base = rec.pair = None
        return rec

    @classmethod
    def of_recipe(cls, path: str, call: int, remake: Recipe) -> "CaptureRecord":
        """The record of an in-place victim whose tensor is computed when first read
        (see :class:`Recipe`); otherwise as :meth:`of_kept` with ``copied=True``: its
        values are the layer's output, whatever overwrote it later."""
        rec = cls.of_kept(path, call, remake.x, True)
        rec.remade_by(remake)
        return rec

    def remade_by(self, remake: Recipe) -> None:
        """Compute this record's tensor from ``remake`` when first read, instead of
        holding it (a speed-up dropped the kept copy of an in-place victim for it)."""
        self._tensor, self._remake = None, remake

    @property
    def leaf_shapes(self) -> dict[str, tuple[int, ...]]:
        """Every tensor leaf's shape, by leaf name. A single kept tensor's is made on
        first read: a run makes a record per layer call, and few are asked this."""
        if self._leaf_shapes is None:
            self._leaf_shapes = {"": self.shape or ()}
        return self._leaf_shapes

    @leaf_shapes.setter
    def leaf_shapes(self, shapes: dict[str, tuple[int, ...]]) -> None:
        self._leaf_shapes = shapes

    @property
    def tensor(self) -> torch.Tensor | None:
        if self._remake is not None:
            self._tensor = self._remake.value(self.path)
            self._remake = None
        return self._tensor

    @tensor.setter
    def tensor(self, t: torch.Tensor | None) -> None:
        self._tensor, self._remake = t, None

    def __getstate__(self) -> tuple[None, dict]:
        # A remade tensor is computed before the record leaves the process (e.g. from
        # a Ray actor): its recipe holds the layer's input, not the value.
        self.tensor  # noqa: B018 - the property computes and caches
        return None, {k: getattr(self, k) for k in self.__slots__}

    def __setstate__(self, state: tuple[None, dict]) -> None:
        for k, v in state[1].items():
            setattr(self, k, v)

    def __repr__(self) -> str:
        return (f"CaptureRecord(path={self.path!r}, call={self.call}, shape={self.shape}, "
                f"intervention={self.intervention!r}, kept={self.tensor is not None})")

    @property
    def stats(self) -> TensorStats | None:
        if self._lazy:
            self._summarize_now()
        stats = self._stats
        if stats is None or isinstance(stats, TensorStats):
            return stats
        # statistics only, CPU: binned on first read (a PendingStats, or of_stats')
        self._stats = resolved = stats.resolve()
        return resolved

    @property
    def pre_stats(self) -> TensorStats | None:
        if self._lazy:
            self._summarize_now()
        if isinstance(self._pre_stats, PendingStats):
            self._pre_stats = self._pre_stats.resolve()
        return self._pre_stats

    @property
    def baseline_stats(self) -> TensorStats | None:
        """This call in the baseline run, binned like :attr:`stats` where its tensor is kept."""
        if self._lazy:
            self._summarize_now()
        if self._baseline_stats is None and self.baseline_tensor is not None:
            # Kept on a device run: the host copy, binned like the intervened run's summary.
            self._baseline_stats = summarize(self.baseline_tensor,
                                             hist_range=stats_range(self.stats)).resolve()
        return self._baseline_stats

    def matches_baseline(self) -> bool:
        """Whether the kept tensor equals the baseline run's, value for value (an
        unchanged layer is drawn once). Remembered for the tensors it compared: a view
        asks several times a redraw, and each ``torch.equal`` reads both tensors."""
        b, t = self.baseline_tensor, self.tensor
        if b is None or t is None:
            return False
        known = self._same_base
        if known is None or known[0] is not b or known[1] is not t:
            known = self._same_base = (b, t, b.shape == t.shape and torch.equal(b, t))
        return known[2]

    @property
    def stats_ready(self) -> bool:
        """False while statistics wait to be computed on first read."""
        return not self._lazy

    def _summarize_now(self) -> None:
        base_t = self.baseline_tensor
        extra = [stats_range(self._baseline_stats)] if base_t is None else []
        pre, post, base = summarize_shared([self.pre_tensor, self.tensor, base_t], extra)
        changed = None
        if self.pre_tensor is not None and self.tensor is not None:
            changed = changed_count(self.pre_tensor, self.tensor)
        self._stats, self._pre_stats = _joined(post, pre, changed)
        if base is not None:
            self._baseline_stats = base.resolve()
        self._lazy = False

    @property
    def shape(self) -> tuple[int, ...] | None:
        if self._remake is not None:  # the input's shape: not computed for this
            return tuple(self._remake.x.shape)
        if self.tensor is not None:
            return tuple(self.tensor.shape)
        return self._stats.shape if self._stats is not None else None

    @property
    def leaves(self) -> "tuple[CaptureRecord, ...]":
        """This record (the first tensor leaf) and one per other tensor leaf, in the output's order."""
        return (self, *self.extra_leaves) if self.extra_leaves else (self,)

    def leaf_record(self, name: str) -> "CaptureRecord | None":
        """The record of the tensor leaf called ``name`` (``""`` or :attr:`leaf`: this one)."""
        if not name or name == self.leaf:
            return self
        return next((r for r in self.extra_leaves if r.leaf == name), None)

    @property
    def nbytes(self) -> int:
        """Bytes of the kept tensors of every leaf (after, before, baseline)."""
        n = 0
        for r in self.leaves:
            if r._remake is not None:  # what it will hold once read
                n += r._remake.nbytes
            for t in (r._tensor, r.pre_tensor, r.baseline_tensor):
                if t is not None:
                    n += t.element_size() * t.numel()
        return n


def _joined(post: PendingStats | None, pre: PendingStats | None, changed=None):
    """Resolve a post/pre pair; both report the fraction of values the intervention changed."""
    stats = post.resolve() if post is not None else None
    pre_s = pre.resolve() if pre is not None else None
    if changed is not None:
        counted = pre_s or stats
        n = counted.count if counted is not None else 0
        frac = fraction(changed, n)
        stats = dataclasses.replace(stats, fraction_changed=frac) if stats is not None else None
        pre_s = dataclasses.replace(pre_s, fraction_changed=frac) if pre_s is not None else None
    return stats, pre_s


def resolve_records(captures: dict[str, list[CaptureRecord]]) -> None:
    """Compute every record's statistics now (e.g. on a worker, before a GUI reads them)."""
    for recs in captures.values():
        for rec in recs:
            for r in rec.leaves:
                r.stats, r.pre_stats, r.baseline_stats  # noqa: B018 - the properties compute and cache
