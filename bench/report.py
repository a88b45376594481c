"""Judging rows against their targets and printing them: a Markdown table or JSON.

A *row* is a plain dict (JSON-ready) built by :mod:`bench.__main__`: one case
on one model with its timing summary, memory figures and correctness check.
"""

from __future__ import annotations

import json
from typing import Any, Iterable

from .cases import Target


#: Below this plain-forward time a ratio measures Python call overhead, not capture.
FIXED_COST_REGIME_MS = 1.0


def judge(row: dict, target: Target | None, plain: dict | None) -> None:
    """Fill ``met``/``miss`` (time) and ``mem_met``/``mem_limit_mib`` (memory) in ``row``.

    ``plain``: the plain forward's row of the same model (its memory figures).
    Memory is judged on the live peaks (``live_peak_mib``, layout-independent)
    where both rows have one, else on the resident peaks (``mem_basis`` says which).
    """
    row["target"] = target.describe() if target else ""
    row["met"] = row["miss"] = row["mem_met"] = row["mem_limit_mib"] = None
    if target is None or row.get("error"):
        return
    if (target.kind in ("ratio", "floor") and row.get("ratio") is not None
            and (row.get("plain_median_ms") or 0.0) < FIXED_COST_REGIME_MS):
        # A forward of microseconds is all fixed cost: the ratio targets are for real
        # models; here the absolute times (and compare() on demo:clamp) are what count.
        row["miss"] = f"n/a: forward < {FIXED_COST_REGIME_MS:g} ms"
    elif target.kind == "floor" and row.get("over_floor") is not None:
        # Read against its reference measured in the same rounds: the median over
        # rounds of (this ratio - the reference's ratio).
        row["met"] = row["over_floor"] <= target.limit
        if not row["met"]:
            row["miss"] = f"+{row['over_floor'] - target.limit:.3f}"
    elif target.kind == "ratio" and row.get("ratio") is not None:
        row["met"] = row["ratio"] <= target.limit
        if not row["met"]:
            row["miss"] = f"+{row['ratio'] - target.limit:.3f}×"
    elif target.kind == "ms" and row.get("median_ms") is not None:
        row["met"] = row["median_ms"] <= target.limit
        if not row["met"]:
            row["miss"] = f"+{row['median_ms'] - target.limit:.2f} ms"
    plain = plain or {}
    basis = ("live_peak_mib" if row.get("live_peak_mib") is not None
             and plain.get("live_peak_mib") is not None else "peak_above_model_mib")
    peak, plain_peak = row.get(basis), plain.get(basis)
    if target.memory and peak is not None and plain_peak is not None:
        row["mem_basis"] = "live" if basis == "live_peak_mib" else "resident"
        if target.memory == "capture":
            limit = plain_peak + 1.1 * (row.get("captured_mib") or 0.0)
        else:  # "stats": within 10% of the plain forward's peak
            limit = 1.10 * plain_peak
        row["mem_limit_mib"] = limit
        row["mem_met"] = peak <= limit


def _yes(v: bool | None, miss: str | None = None) -> str:
    if v is None:
        return miss or "—"
    return "yes" if v else f"no ({miss})" if miss else "no"


def _ms(v: float | None) -> str:
    if v is None:
        return "—"
    return f"{v:.3f}" if v < 10 else f"{v:.1f}"


def _ratio(row: dict) -> str:
    if row.get("ratio") is None:
        return "—"
    return f"{row['ratio']:.3f} [{row['ratio_q1']:.3f}–{row['ratio_q3']:.3f}]"


def _floor(row: dict) -> str:
    if row.get("over_floor") is None:
        return "—"
    # The spread of the per-round differences beside their median: on a shared machine
    # it is often wider than a target's 0.05, and a reader needs it to judge a miss.
    spread = (f" [{row['over_floor_q1']:+.3f}–{row['over_floor_q3']:+.3f}]"
              if row.get("over_floor_q1") is not None else "")
    return f"{row['over_floor']:+.3f}{spread} (ref {row['floor_ratio']:.3f})"


def _mem(row: dict) -> str:
    peak = row.get("peak_above_model_mib")
    if peak is None:
        return "—"
    cap = row.get("captured_mib")
    runs = row.get("peak_runs_mib") or []
    spread = f" [{runs[0]:.0f}–{runs[-1]:.0f}]" if len(runs) > 1 else ""  # median of fresh processes
    live = row.get("live_peak_mib")
    return (f"+{peak:.1f}{spread}" + (f", live +{live:.1f}" if live is not None else "")
            + (f" ({cap:.1f} kept)" if cap else ""))


def _mem_met(row: dict) -> str:
    if row.get("mem_met") is None:
        return "—"
    return "yes" if row["mem_met"] else f"no (limit {row['mem_limit_mib']:.1f})"


def _correct(row: dict) -> str:
    if row.get("correct") is None:
        return "—"
    return "yes" if row["correct"] else "NO"


COLUMNS = ("case", "model", "median ms", "plain ms", "ratio [IQR]", "over floor", "target", "met?",
           "peak MiB above model", "mem met?", "correct")


def table(rows: Iterable[dict]) -> str:
    """The rows as a Markdown table, columns padded so it also reads as plain text."""
    body = []
    for r in rows:
        if r.get("error"):
            body.append((r["title"], r["model"], "error", "", "", "", r.get("target", ""), "", "",
                         "", ""))
            continue
        body.append((r["title"], r["model"], _ms(r.get("median_ms")), _ms(r.get("plain_median_ms")),
                     _ratio(r), _floor(r), r.get("target", ""), _yes(r.get("met"), r.get("miss")), _mem(r),
                     _mem_met(r), _correct(r)))
    widths = [max(len(c), *(len(b[i]) for b in body)) if body else len(c)
              for i, c in enumerate(COLUMNS)]
    line = lambda cells: "| " + " | ".join(c.ljust(w) for c, w in zip(cells, widths)) + " |"
    out = [line(COLUMNS), "| " + " | ".join("-" * w for w in widths) + " |"]
    out += [line(b) for b in body]
    return "\n".join(out)


def notes(rows: Iterable[dict]) -> list[str]:
    """One line per row that has something to say (layers used, stale counts, errors)."""
    out = []
    for r in rows:
        bits = [b for b in (r.get("note"), r.get("check_note"), r.get("error")) if b]
        if bits:
            out.append(f"{r['title']} / {r['model']}: " + "; ".join(bits))
    return out


def header(meta: dict) -> str:
    threads = f"{meta['threads']} threads" + (" (torch's default)" if meta.get("threads_default")
                                              else " (--threads)")
    mem = "kept (library default)" if meta.get("malloc_keeps_freed_memory") else "glibc default"
    lines = [f"Hookscope bench — torch {meta['torch']}, {meta['device']}, "
             f"{threads}, {meta['cpus']} CPUs, {meta.get('clock', 'wall')} clock, freed memory {mem}, "
             f"{'quick' if meta['quick'] else 'full'} mode, {meta['when']}, "
             f"load avg {meta['load_before'][0]:.2f} before / {meta.get('load_after', ['?'])[0]} after"]
    if meta.get("statistics_path"):
        lines.append(f"  statistics: {meta['statistics_path']}")
    for name, m in meta["models"].items():
        lines.append(f"  {name}: {m['label']}, {m['params'] / 1e6:.2f}M params")
    for name, status in meta["competitors"].items():
        lines.append(f"  {name}: {status}")
    return "\n".join(lines)


def render_text(meta: dict, rows: list[dict]) -> str:
    parts = [header(meta), "", table(rows), ""]
    ns = notes(rows)
    if ns:
        parts += ["Notes:"] + [f"- {n}" for n in ns]
    parts += ["", "ratio = median over rounds of (case / plain forward in the same pair); "
              "IQR of those ratios in brackets. over floor = median over rounds of (ratio - "
              "the reference's ratio in the same round). Memory: peak above the built model, "
              + meta.get("memory_method", "")]
    return "\n".join(parts)


def render_json(meta: dict, rows: list[dict]) -> str:
    return json.dumps({"meta": meta, "rows": rows}, indent=2, default=_jsonable)


def _jsonable(v: Any) -> Any:
    if hasattr(v, "item"):
        return v.item()
    return str(v)
