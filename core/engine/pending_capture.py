"""A capture between its hook and its record: :class:`PendingCapture`.

A hook of :class:`~.hooks.HookSession` appends one per layer call: the
tensors kept (with their version counters, so :meth:`HookSession.stale_paths`
can tell which a later in-place op changed), the statistics started on the
device, the baseline's record to join; :meth:`HookSession.finish` turns them
into :class:`~.capture_record.CaptureRecord`.
"""

from __future__ import annotations

from typing import Self

import torch

from .capture_record import CaptureRecord
from ..plan.intervention_base import Intervention
from .stats import PendingStats


class PendingCapture:
    """A capture whose stats may still be on the device."""

    __slots__ = ("path", "call", "leaf", "leaf_shapes", "intervention", "stats", "pre_stats",
                 "kept", "pre_kept", "copied", "lazy", "changed", "baseline", "extra")

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
        # (tensor, its version when kept), or (copy, None)
        self.kept: tuple[torch.Tensor, int | None] | None = None
        self.pre_kept: tuple[torch.Tensor, int | None] | None = None
        self.copied = False
        self.lazy = lazy
        self.changed: torch.Tensor | None = None
        self.baseline: CaptureRecord | None = baseline
        self.extra: tuple[PendingCapture, ...] = ()  # the other tensor leaves of a nested output

    @classmethod
    def of_kept(cls, path: str, call: int, tensor: torch.Tensor, version: int | None,
                copied: bool) -> Self:
        """The pending capture of a kept bare tensor (no intervention, no baseline)."""
        rec = cls(path, call, "", {"": tuple(tensor.shape)}, None, True, None)
        rec.kept = (tensor, version)
        rec.copied = copied
        return rec
