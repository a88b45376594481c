"""What one shard of a scan gives back, and how shards merge.

:class:`ScanPartial` holds a :class:`~.layer_accumulator.LayerAccumulator` per captured
layer and one :class:`EffectRow` per input. Shards run anywhere (this process, a Ray
actor) over any split of the input numbers; :meth:`ScanPartial.merge` folds one into
another, and the rows are kept in input order, so the merged partial equals the one a
single pass over every input gives.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass, field

from .layer_accumulator import LayerAccumulator


@dataclass(slots=True)
class EffectRow:
    """One input: its label, the top prediction and the metric without and with the
    interventions (``None`` where there is none: no scores, no label, no intervention)."""

    index: int
    label: str | None = None
    label_index: int | None = None
    pred_without: int | None = None
    pred_with: int | None = None
    metric_without: float | None = None
    metric_with: float | None = None

    @property
    def changed(self) -> bool | None:
        if self.pred_without is None or self.pred_with is None:
            return None
        return self.pred_without != self.pred_with

    def correct(self, with_: bool) -> bool | None:
        pred = self.pred_with if with_ else self.pred_without
        if pred is None or self.label_index is None:
            return None
        return pred == self.label_index


@dataclass
class ScanPartial:
    layers: dict[str, LayerAccumulator] = field(default_factory=dict)
    rows: list[EffectRow] = field(default_factory=list)
    forwards: int = 0
    batch_size: int = 1
    #: the metric's name (as the rows' metric columns are headed)
    metric: str = ""
    #: bytes of one input's captured activations and output (what sizes a batch)
    item_bytes: int = 0

    def merge(self, other: "ScanPartial") -> "ScanPartial":
        """Fold ``other`` into this one (returns self)."""
        for path, acc in other.layers.items():
            if path in self.layers:
                self.layers[path].merge(acc)
            else:
                self.layers[path] = acc
        if not self.rows or not other.rows or self.rows[-1].index < other.rows[0].index:
            self.rows.extend(other.rows)  # shards in order: nothing to sort
        else:  # each side is in input order: one linear merge
            self.rows = list(heapq.merge(self.rows, other.rows, key=lambda r: r.index))
        self.forwards += other.forwards
        self.batch_size = max(self.batch_size, other.batch_size)
        self.metric = self.metric or other.metric
        self.item_bytes = max(self.item_bytes, other.item_bytes)
        return self


def merge(parts: list[ScanPartial]) -> ScanPartial:
    """Every shard's partial folded into one (an empty list: an empty partial)."""
    out = ScanPartial()
    for p in parts:
        out.merge(p)
    return out


def finite(v: float | None) -> float | None:
    return v if v is not None and math.isfinite(v) else None
