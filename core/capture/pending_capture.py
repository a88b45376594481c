"""A capture between its hook and its record: :class:`_Pending`.

A hook of :class:`~.hooks.HookSession` appends one per layer call where the
short raw entries do not serve (nested outputs, interventions, a baseline to
join, the first run's in-place guard, which watches and replaces its ``kept``
slot); :meth:`HookSession.finish` turns them into
:class:`~.capture_record.CaptureRecord`.
"""

from __future__ import annotations

from typing import Any

import torch

from .capture_record import CaptureRecord
from ..plan.intervention_base import Intervention
from .stats import PendingStats
from .stats_plain import PlainMoments, plain_pending


class _Pending:
    """A capture whose stats may still be on the device."""

    __slots__ = ("path", "call", "leaf", "leaf_shapes", "intervention", "stats", "pre_stats",
                 "kept", "pre_kept", "copied", "lazy", "changed", "baseline", "extra", "remake")

    def __init__(self, path: str, call: int, leaf: str, leaf_shapes: dict[str, tuple[int, ...]],
                 intervention: Intervention | None, lazy: bool,
                 baseline: CaptureRecord | None) -> None:
        self.path = path
        self.call = call
        self.leaf = leaf
        self.leaf_shapes = leaf_shapes
        self.intervention = intervention
        self.stats: PendingStats | None = None
        self.pre_stats: PendingStats | None = None
        self.kept: tuple[torch.Tensor, int | None] | None = None
        self.pre_kept: tuple[torch.Tensor, int | None] | None = None
        self.copied = False
        self.lazy = lazy
        self.changed: torch.Tensor | None = None
        self.baseline: CaptureRecord | None = baseline
        self.extra: tuple[_Pending, ...] = ()  # the other tensor leaves of a nested output
        # (hook, input, input version) of a capture that can be computed again from its
        # input (core/capture/victim_remake.py); it is, once ``kept`` is dropped for it (the first
        # run's in-place guard does that instead of copying).
        self.remake: tuple[Any, torch.Tensor, int] | None = None

    @classmethod
    def of_plain(cls, path: str, call: int, got: PlainMoments) -> "_Pending":
        """The pending capture of a statistics-only hook's kernel summary."""
        rec = cls(path, call, "", {"": got[0]}, None, False, None)
        rec.stats = plain_pending(got)
        return rec

    @classmethod
    def of_kept(cls, path: str, call: int, tensor: torch.Tensor, version: int | None,
                copied: bool) -> "_Pending":
        """The pending capture of a kept bare tensor's raw entry (see HookSession._record)."""
        rec = cls(path, call, "", {"": tuple(tensor.shape)}, None, True, None)
        rec.kept = (tensor, version)
        rec.copied = copied
        return rec


def kept_on_cpu(entry: Any) -> bool:
    """Whether a pending entry is a bare tensor kept on the CPU, to be read as it is
    (:meth:`HookSession._finish_kept`): a raw entry, or a first run's :class:`_Pending`
    with no intervention, no other leaf and no baseline, kept or to be remade."""
    if type(entry) is tuple:
        return len(entry) != 3 and entry[2].is_cpu  # (3: a statistics-only kernel summary)
    return (entry.intervention is None and not entry.extra and entry.pre_kept is None
            and entry.baseline is None and entry.lazy
            and (entry.kept[0].is_cpu if entry.kept is not None else entry.remake is not None))
