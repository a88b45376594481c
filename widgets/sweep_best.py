"""Each row's best cell of a sweep's heat map: the column of the row's largest number, marked
where a row's best means something (no Qt: the marks are drawn by
:class:`~hookscope.widgets.sweep_plot.SweepPlot`).

A row is marked over an input set (its numbers are means; the largest mean is the best
strength, as the curve's star is) and in any grid with a numeric axis (a layer against
strengths, say). A row with fewer than two numbers yet, or all of them equal, has no best
and no mark; a tie marks the first of the largest."""

from __future__ import annotations

import numpy as np

from hookscope.core.analyses import SweepResult
from hookscope.widgets.sweep_labels import numeric


def marks_row_bests(result: SweepResult) -> bool:
    """Whether a heat map of ``result`` marks each row's largest number."""
    if result.values.ndim < 2:
        return False
    over_set = result.per_input is not None and result.estimates is None
    return over_set or any(numeric(list(c)) for c in result.coords.values())


def row_bests(grid: np.ndarray) -> dict[int, int]:
    """``{row: column of its largest number}`` of a rows × columns grid (NaN: not run yet),
    for the rows that have a best (see the module docstring)."""
    out: dict[int, int] = {}
    for r, row in enumerate(np.asarray(grid, dtype=np.float64)):
        finite = np.isfinite(row)
        if finite.sum() < 2 or row[finite].max() == row[finite].min():
            continue
        out[r] = int(np.argmax(np.where(finite, row, -np.inf)))
    return out


__all__ = ["marks_row_bests", "row_bests"]
