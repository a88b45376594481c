"""A comparison as HTML for a notebook (``RunResult._repr_html_``).

The verdict in words, a small PNG of the output without and with the plan
(:mod:`.output_thumbnail`), what the output means in the model's own terms
(top classes, next tokens, detections: :func:`~.outputs.describe_outputs`),
and the captures without/with (:func:`~.result_table.capture_rows`). Every
text that came from the model or its tokenizer (labels, tokens, layer names)
is escaped, and the tables are cut at a fixed number of rows, so the HTML
stays small and inert whatever the model.
"""

from __future__ import annotations

import base64
from html import escape
from typing import Any

MAX_CAPTURE_ROWS = 40
MAX_POSITIONS = 8     # next-token rows shown (the last positions: where the prompt ends)
MAX_CLASS_ROWS = 4    # batch rows of a classifier shown
TOP = 3


def _num(v: Any) -> str:
    return "" if v is None else f"{v:.4g}"


def _table(head: list[str], rows: list[list[str]]) -> str:
    th = "".join(f"<th>{escape(h)}</th>" for h in head)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table><thead><tr>{th}</tr></thead><tbody>{body}</tbody></table>"


def _tops(top: list[dict]) -> str:
    return ", ".join(f"{escape(str(t['label']))} {t['prob']:.3f}" for t in top[:TOP])


def meaning_html(desc: dict[str, Any]) -> str:
    """The output by meaning (a :func:`~.outputs.describe_outputs` dict) as a table."""
    kind = desc.get("kind")
    if kind == "classes":
        rows = [[str(r), _tops(row["top_without"]), _tops(row["top_with"]),
                 "yes" if row["top_changed"] else ""]
                for r, row in enumerate(desc["rows"][:MAX_CLASS_ROWS])]
        return "<p><b>Top classes</b></p>" + _table(["row", "without", "with", "top changed"], rows)
    if kind == "tokens":
        rows = [[str(p["position"]), escape(str(p["input"] if p["input"] is not None else "")),
                 _tops(p["top_without"]), _tops(p["top_with"]), "yes" if p["top_changed"] else ""]
                for p in desc["positions"][-MAX_POSITIONS:]]
        ch = desc["changed_positions"]
        return (f"<p><b>{escape(desc['predicts'].capitalize())}</b> (top token changed at "
                f"{len(ch)} of {desc['positions_total']} positions)</p>"
                + _table(["pos", "input", "without", "with", "changed"], rows))
    if kind == "detections":
        rows = [[str(i), str(img["count_without"]), str(img["count_with"])]
                for i, img in enumerate(desc["images"])]
        return "<p><b>Detections</b></p>" + _table(["image", "without", "with"], rows)
    rows = [[escape(str(leaf["name"])), escape(str(leaf["shape"])),
             escape(str(leaf.get("changed_values", ""))), escape(str(leaf.get("max_abs_diff", "")))]
            for leaf in desc.get("leaves", [])[:MAX_CAPTURE_ROWS]]
    return "<p><b>Output</b></p>" + _table(["leaf", "shape", "values changed", "max |Δ|"], rows)


def captures_html(result: Any) -> str:
    from ..views.result_table import capture_rows

    rows = capture_rows(result)
    if not rows:
        return "<p>No layer was captured: tick layers in the window, or s.capture(path).</p>"
    shown = [[escape(r["layer"] + r["leaf"]), str(r["call"]), escape(str(r["shape"])),
              escape(r["intervention"]),
              f"{_num(r['mean_without'])} ± {_num(r['std_without'])}" if r["mean_without"] is not None
              else "", f"{_num(r['mean_with'])} ± {_num(r['std_with'])}",
              "" if r["fraction_changed"] is None else f"{100 * r['fraction_changed']:.3g}%"]
             for r in rows[:MAX_CAPTURE_ROWS]]
    more = (f"<p>… and {len(rows) - MAX_CAPTURE_ROWS} more (result.to_dataframe() has them "
            "all)</p>" if len(rows) > MAX_CAPTURE_ROWS else "")
    return ("<p><b>Captures</b> (mean ± std)</p>"
            + _table(["layer", "call", "shape", "intervention", "without", "with", "changed"], shown)
            + more)


def result_html(result: Any, verdict: str) -> str:
    """The whole view of ``result`` (a RunResult) with its ``verdict`` in words, see the
    module docstring."""
    from ..views.output_thumbnail import comparison_png
    from ..views.outputs import describe_outputs

    parts = [f"<p><b>Hookscope comparison</b> on {escape(str(result.device))}: "
             f"{escape(verdict)}</p>"]
    png = comparison_png(result.output_without, result.output_with, result.meaning)
    if png is not None:
        data = base64.b64encode(png).decode("ascii")
        parts.append(f'<img src="data:image/png;base64,{data}" alt="the output without the plan '
                     '(grey) and with it (orange)" title="output without (grey) and with (orange)">')
    desc = describe_outputs(result.output_without, result.output_with, result.meaning,
                            result.inputs)
    parts.append(meaning_html(desc))
    parts.append(captures_html(result))
    return '<div class="hookscope-result">' + "".join(parts) + "</div>"


def _shape(x: Any) -> str:
    shape = getattr(x, "shape", None)
    return "×".join(map(str, shape)) if shape is not None else type(x).__name__


def result_text(result: Any, verdict: str) -> str:
    """A short plain-text view (``repr``, for a terminal, ``python -i`` or IPython): the
    verdict (given, as the engine words it), the output's shape, what was captured and
    intervened, the timings, and where the tensors are, instead of every tensor printed whole."""
    lines = [f"<RunResult on {result.device}: {verdict}",
             f"  output: {_shape(result.output_with)}  (.output_without, .output_with; "
             f"outputs_differ={result.outputs_differ}, max_abs_diff={result.max_abs_diff:.4g})"]
    caps = [f"{p} ({_shape(recs[0])}{f', {len(recs)} calls' if len(recs) > 1 else ''})"
            for p, recs in result.captures.items() if recs]
    if caps:
        more = f" and {len(caps) - TOP * 2} more" if len(caps) > TOP * 2 else ""
        lines.append(f"  captures: {', '.join(caps[:TOP * 2])}{more}  (.captures[PATH][CALL])")
    plan = result.plan
    if plan is not None and plan.interventions:
        ivs = [f"{p}={iv.describe()}" for p, iv in plan.interventions.items()]
        lines.append(f"  interventions: {', '.join(ivs[:TOP * 2])}"
                     + (f" and {len(ivs) - TOP * 2} more" if len(ivs) > TOP * 2 else ""))
    for alarm in result.alarms:
        lines.append(f"  ALARM {alarm}")
    if result.timings_ms:
        lines.append("  timings (ms): " + ", ".join(f"{k} {v:.3g}" for k, v in result.timings_ms.items()))
    if result.extras:
        lines.append(f"  extras: {', '.join(result.extras)}")
    return "\n".join(lines) + ">"
