"""Per captured layer, over a set: moments, histogram, per-unit mean and exact top-k.

A unit is one index along the layer's feature axis (channels for convolutions,
features for Linear and attention outputs: :func:`~..plan.feature_axis.feature_dim`,
the axis ``zero:UNITS`` acts on). An input's activation of a unit is its largest value
over every other axis (positions, pixels); the position where it is largest is kept
(for text, the token to highlight; for an image, ``row * width + column``).

Top-k is exact: each batch's per-input maxima are merged with the kept k by value,
ties going to the lower input number, so any split into batches or shards gives the
same k inputs as sorting every input's activation at once.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch
from torch import nn

from ..base.errors import InputError
from ..plan.feature_axis import feature_dim
from .running_stats import AlignedHistogram, Moments


@dataclass
class LayerAccumulator:
    path: str
    top_k: int = 9
    bins: int = 64
    moments: Moments = field(default_factory=Moments)
    hist: AlignedHistogram | None = None
    #: the feature axis of one input's activation (batch axis dropped); None before any
    unit_dim: int | None = None
    #: one input's activation shape (batch axis dropped)
    item_shape: tuple[int, ...] | None = None
    unit_sum: np.ndarray | None = None
    unit_count: int = 0
    top_values: torch.Tensor | None = None    # [units, <=k] float64, best first
    top_index: torch.Tensor | None = None     # [units, <=k] input numbers
    top_pos: torch.Tensor | None = None       # [units, <=k] position of the maximum

    def __post_init__(self) -> None:
        if self.hist is None:
            self.hist = AlignedHistogram(self.bins)

    @property
    def units(self) -> int:
        return 0 if self.unit_sum is None else len(self.unit_sum)

    def add(self, act: torch.Tensor, indices: list[int], module: nn.Module | None = None) -> None:
        """Fold in ``act`` (batch first, one row per input number in ``indices``)."""
        b = len(indices)
        if act.dim() == 0 or act.shape[0] != b:
            raise InputError(f"layer {self.path!r} gave shape {tuple(act.shape)} for a batch of "
                             f"{b}: its first axis is not the batch")
        if not act.is_floating_point():
            act = act.double()
        d = feature_dim(act, module) if act.dim() >= 2 else None
        item_shape = tuple(act.shape[1:])
        if self.item_shape is None:
            self.item_shape, self.unit_dim = item_shape, (d - 1 if d is not None else None)
        units = act.shape[d] if d is not None else 1
        if self.unit_sum is not None and units != len(self.unit_sum):
            raise InputError(f"layer {self.path!r} has {units} units for one input and "
                             f"{len(self.unit_sum)} for another: its units differ between inputs")
        self.moments.add(act)
        assert self.hist is not None
        self.hist.add(act)
        a = act.detach().movedim(d, -1).reshape(b, -1, act.shape[d]) if d is not None \
            else act.detach().reshape(b, 1, 1)
        a = a.double()
        finite = torch.where(torch.isfinite(a), a, torch.zeros((), dtype=a.dtype, device=a.device))
        sums = finite.sum(dim=(0, 1)).cpu().numpy()
        if self.unit_sum is None:
            self.unit_sum = np.zeros(units)
        self.unit_sum += sums
        self.unit_count += a.shape[0] * a.shape[1]
        ranked = torch.where(torch.isnan(a), torch.full((), -torch.inf, dtype=a.dtype,
                                                        device=a.device), a)
        vals, pos = ranked.max(dim=1)                       # [b, units]
        idx = torch.tensor(indices, dtype=torch.long).unsqueeze(1).expand(b, units)
        self._merge_top(vals.T.cpu(), idx.T.contiguous(), pos.T.cpu())

    def _merge_top(self, vals: torch.Tensor, idx: torch.Tensor, pos: torch.Tensor) -> None:
        if self.top_values is not None:
            assert self.top_index is not None and self.top_pos is not None
            vals = torch.cat([self.top_values, vals], dim=1)
            idx = torch.cat([self.top_index, idx], dim=1)
            pos = torch.cat([self.top_pos, pos], dim=1)
        # by input number, then (stably) by value: ties go to the lower number
        order = torch.sort(idx, dim=1, stable=True).indices
        vals, idx, pos = (t.gather(1, order) for t in (vals, idx, pos))
        order = torch.sort(vals, dim=1, descending=True, stable=True).indices[:, :self.top_k]
        self.top_values, self.top_index, self.top_pos = (t.gather(1, order) for t in (vals, idx, pos))

    def merge(self, o: "LayerAccumulator") -> None:
        """Fold in another shard's accumulator of the same layer."""
        if o.item_shape is None:
            return
        self.moments.merge(o.moments)
        assert self.hist is not None and o.hist is not None
        self.hist.merge(o.hist)
        if self.item_shape is None:
            self.item_shape, self.unit_dim = o.item_shape, o.unit_dim
        if o.unit_sum is not None:
            if self.unit_sum is None:
                self.unit_sum = np.zeros_like(o.unit_sum)
            if len(self.unit_sum) != len(o.unit_sum):
                raise InputError(f"layer {self.path!r} has {len(self.unit_sum)} units in one shard "
                                 f"and {len(o.unit_sum)} in another")
            self.unit_sum += o.unit_sum
        self.unit_count += o.unit_count
        if o.top_values is not None:
            assert o.top_index is not None and o.top_pos is not None
            self._merge_top(o.top_values, o.top_index, o.top_pos)

    @property
    def unit_mean(self) -> np.ndarray:
        if self.unit_sum is None or self.unit_count == 0:
            return np.zeros(0)
        return self.unit_sum / self.unit_count
