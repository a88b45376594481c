"""A comparison's captures as rows: one per captured layer call (and per leaf of a nested
output), with the statistics without and with the plan.

The rows are plain dicts (numbers and strings), shared by the notebook view
(:mod:`.result_html`) and :func:`result_dataframe`, which turns them into a
pandas DataFrame; pandas is optional and imported only there.
"""

from __future__ import annotations

from typing import Any

from ..base.errors import HookscopeError

#: The columns of :func:`capture_rows`, in order.
COLUMNS = ("layer", "leaf", "call", "shape", "intervention",
           "min_without", "max_without", "mean_without", "std_without",
           "min_with", "max_with", "mean_with", "std_with", "fraction_changed")


def _stats_cols(stats: Any, suffix: str) -> dict[str, float | None]:
    names = ("min", "max", "mean", "std")
    if stats is None:
        return {f"{n}_{suffix}": None for n in names}
    return {f"{n}_{suffix}": float(getattr(stats, n)) for n in names}


def capture_rows(result: Any) -> list[dict[str, Any]]:
    """One dict per captured call and leaf of ``result`` (a RunResult), keys :data:`COLUMNS`.

    "without" is the baseline run's statistics (no interventions), "with" the
    intervened run's; a layer captured in a plain forward has only "with".
    """
    rows = []
    for path, recs in result.captures.items():
        for rec in recs:
            for r in rec.leaves:
                s = r.stats
                row: dict[str, Any] = {
                    "layer": path, "leaf": r.leaf, "call": int(rec.call),
                    "shape": tuple(s.shape) if s is not None else None,
                    "intervention": r.intervention or ""}
                row.update(_stats_cols(r.baseline_stats, "without"))
                row.update(_stats_cols(s, "with"))
                row["fraction_changed"] = (float(s.fraction_changed) if s is not None
                                           and s.fraction_changed is not None else None)
                rows.append(row)
    return rows


def result_dataframe(result: Any) -> Any:
    """:func:`capture_rows` as a pandas DataFrame (one row per captured call and leaf)."""
    try:
        import pandas as pd  # lazy: optional (the notebook extra)
    except ImportError as exc:
        raise HookscopeError("to_dataframe() needs pandas, which is not installed: "
                             "pip install pandas (or read result.captures directly)") from exc
    return pd.DataFrame(capture_rows(result), columns=list(COLUMNS))
