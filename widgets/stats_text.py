"""A layer's statistics in words: the line under each panel (the numbers in
:mod:`.value_format`'s format, as in the leaf chooser's rows)."""

from __future__ import annotations

from html import escape

from hookscope.core import TensorStats
from hookscope.core.engine import ModelPair

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


def pair_text(b: TensorStats | None, a: TensorStats | None, pair: ModelPair) -> str:
    """The statistics line of a panel that compares two models: model A (light) and
    model B (dark) named, each one's numbers, and how far apart they are."""
    if b is None:
        return "No statistics (the layer did not produce a tensor)."

    def line(s: TensorStats | None) -> str:
        if s is None:
            return "no values"
        return (f"min {format_value(s.min)} · max {format_value(s.max)} · "
                f"mean {format_value(s.mean)} · std {format_value(s.std)}")

    text = (f"<b>A</b> (light, {escape(pair.a)}): {line(a)}"
            f"<br><b>B</b> (dark, {escape(pair.b)}): {line(b)}<br>")
    if pair.relative_change == 0:
        text += "A and B are equal here (max |B − A| 0)"
    else:
        cos = "" if pair.cosine is None else f" · cosine {pair.cosine:.6f}"
        text += (f"B − A: max |B − A| {format_value(pair.max_abs_diff)} · relative change "
                 f"{pair.relative_change:.4g}{cos}")
    bad = [f"{n:,} {what}" for n, what in ((b.nan_count, "NaN"), (b.inf_count, "Inf")) if n]
    if bad:
        text += f"<br><span style='color:#c62828'>B contains {' and '.join(bad)}</span>"
    return text
