"""A sweep's axes as labels: numbers to four digits, layer names and token strings as the
sweep labelled them, long ones cut in the middle, and an axis whose ticks are those labels,
thinned so they never overlap (the Sweep dock's heat map and curve, the attention and
divergence views)."""

from __future__ import annotations

import itertools
import math
from typing import Any

import pyqtgraph as pg

from hookscope.core.analyses import SweepResult

LABEL_CHARS = 18       # longer tick labels are cut in the middle (the read-out has them whole)


def short(label: str, n: int = LABEL_CHARS) -> str:
    """``label`` cut in the middle to ``n`` characters (both ends say the most)."""
    return label if len(label) <= n else label[: (n - 1) // 2] + "…" + label[-(n // 2):]


def numeric(values: list[Any]) -> bool:
    """Whether an axis's values are numbers to place by value (a strength), not categories."""
    return bool(values) and all(isinstance(v, (int, float)) and not isinstance(v, bool)
                                and math.isfinite(v) for v in values)


def labels_of(result: SweepResult, name: str) -> list[str]:
    """An axis's labels as shown: numbers to 4 significant digits (``0.6165``, not
    ``0.6165413533834586``), anything else as the sweep labelled it."""
    coords = result.coords.get(name, [])
    if coords and all(isinstance(v, float) for v in coords):
        return [f"{v:.4g}" for v in coords]
    return list(result.axes[name])


def column_labels(result: SweepResult) -> list[str]:
    """The heatmap's columns: the second axis's labels (past two axes, every combination of
    the later axes' labels, the last varying fastest, as the grid is laid out)."""
    names = list(result.axes)[1:]
    if not names:
        return [result.metric]
    return [" · ".join(combo) for combo in itertools.product(*(labels_of(result, n) for n in names))]


class LabelAxis(pg.AxisItem):
    """An axis whose ticks are named categories at 0, 1, 2 … (cells centred on them);
    labels are thinned so they never overlap."""

    def __init__(self, orientation: str, **kwargs: Any) -> None:
        super().__init__(orientation, **kwargs)
        self.labels: list[str] = []
        self.enableAutoSIPrefix(False)
        self.setSIPrefixEnableRanges(())

    def set_labels(self, labels: list[str]) -> None:
        if labels != self.labels:
            self.labels = list(labels)
            self.picture = None
            self.update()

    def _room(self) -> float:
        """Pixels one label needs along the axis."""
        fm = pg.QtGui.QFontMetrics(self.style.get("tickFont") or self.font())
        if self.orientation in ("left", "right"):
            return fm.height() + 2
        widest = max((fm.horizontalAdvance(short(t)) for t in self.labels), default=10)
        return widest + 12

    def tickValues(self, minVal: float, maxVal: float, size: float):  # noqa: N802, N803
        if not self.labels:
            return super().tickValues(minVal, maxVal, size)
        lo, hi = sorted((minVal, maxVal))
        first, last = max(0, math.ceil(lo - 1e-9)), min(len(self.labels) - 1, math.floor(hi + 1e-9))
        if last < first:
            return []
        per = size / max(hi - lo, 1e-9)   # pixels per category
        stride = max(1, math.ceil(self._room() / max(per, 1e-9)))
        return [(float(stride), [float(i) for i in range(first, last + 1, stride)])]

    def tickStrings(self, values, scale, spacing):  # noqa: N802
        if not self.labels:
            return super().tickStrings(values, scale, spacing)
        out = []
        for v in values:
            i = int(round(v))
            out.append(short(self.labels[i]) if 0 <= i < len(self.labels) else "")
        return out


__all__ = ["LABEL_CHARS", "LabelAxis", "column_labels", "labels_of", "numeric", "short"]
