"""A layer's statistics in words: the line under each panel (the numbers in
:mod:`.value_format`'s format, as in the leaf chooser's rows)."""

from __future__ import annotations

from hookscope.core import TensorStats

from .value_format import format_value


def stats_text(stats: TensorStats | None, pre: TensorStats | None = None,
               pre_label: str = "before", kind: str = "the intervention") -> str:
    """The statistics line of a panel, in plain words."""
    if stats is None:
        return "No statistics (the layer did not produce a tensor)."
    parts = [f"min {format_value(stats.min)}", f"max {format_value(stats.max)}", f"mean {format_value(stats.mean)}",
             f"std {format_value(stats.std)}"]
    text = " · ".join(parts)
    if stats.fraction_changed is not None:
        text += (f"<br>{kind} changed {100 * stats.fraction_changed:.1f}% of the "
                 f"{stats.count:,} values")
    if pre is not None:
        name = "without the interventions" if pre_label == "without" else pre_label
        text += f"<br>{name}: min {format_value(pre.min)} · max {format_value(pre.max)} · mean {format_value(pre.mean)}"
    bad = []
    if stats.nan_count:
        bad.append(f"{stats.nan_count:,} NaN")
    if stats.inf_count:
        bad.append(f"{stats.inf_count:,} Inf")
    if bad:
        text += f"<br><span style='color:#c62828'>contains {' and '.join(bad)}</span>"
    return text
