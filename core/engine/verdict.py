"""The output verdict in words: did the plan change the model's output, and why (not)?

Used by the CLI table, ``--json`` and (through the same function) the window.
It reads only what a :class:`~hookscope.core.RunResult` holds: whether the
outputs differ, the largest change, and for captured intervened layers the
fraction of values their intervention changed (every kind reports it).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..plan.at import Span
from ..views.detections import is_torchvision_style
from .output_diff import flat_array

MAX_ARGMAX = 64  # up to this many output values, say where the largest one went
NAMED = 3  # interventions named in a sentence; the rest are counted


def first_few(parts: list[str], n: int = NAMED) -> str:
    """``'a, b, c and 3 more'``: the first ``n`` named, the rest counted."""
    more = len(parts) - n
    return ", ".join(parts[:n]) + (f" and {more} more" if more > 0 else "")


def output_verdict(result: Any) -> str:
    """One or two sentences a learner understands (and how source positions were aligned)."""
    text = _verdict(result)
    plan = result.plan
    placed = [(p, iv.where()) for p, iv in (plan.interventions.items() if plan else ())
              if iv.pre_pass_input() is not None and iv.where() is not None
              and iv.where().positions is not None]
    aligned = [f"{at.suffix()} on {p}" for p, at in placed]
    if aligned:
        text += f" Positions ({first_few(aligned)}) are counted in the source and the target each on its own"
        # "-1 is each one's last token" only where a position counts from the end
        text += (": -1 is each one's last token." if any(from_end(at.positions) for _p, at in placed)
                 else ", from their first token.")
    return text


def from_end(positions: Any) -> bool:
    """Whether a positions selector counts from the end (a negative index or bound)."""
    items = positions if isinstance(positions, (tuple, list)) else (positions,)
    for item in items:
        bounds = (item.start, item.stop) if isinstance(item, Span) else (item,)
        if any(isinstance(b, int) and b < 0 for b in bounds):
            return True
    return False


def _verdict(result: Any) -> str:
    plan = result.plan
    intervened = dict(plan.interventions) if plan is not None else {}
    if not result.outputs_differ:
        if not intervened:
            return "Outputs are identical: the plan only captured, it did not change anything."
        return identical_despite_intervention(result, intervened)
    if not intervened:  # nothing was changed, yet the outputs differ: the model itself did
        d = result.max_abs_diff
        return ("The outputs differ although the plan changed nothing (largest change |Δ| = "
                f"{'∞' if math.isinf(d) else f'{d:.4g}'}): the model changed between the two "
                "forwards (its forward changes its own weights, buffers or other state, or its "
                "arithmetic is not deterministic).")
    names = first_few([f"{iv.describe()} on {p}" for p, iv in intervened.items()])
    if is_torchvision_style(result.output_without) and is_torchvision_style(result.output_with):
        # a detector: boxes, labels and scores flattened into one series say nothing
        counts = [(len(a["boxes"]), len(b["boxes"]))
                  for a, b in zip(result.output_without, result.output_with)]
        n = "; ".join(f"{a} box{'es' if a != 1 else ''} without, {b} with"
                      for a, b in counts[:4])
        return (f"The intervention{'s' if len(intervened) > 1 else ''} ({names}) changed the "
                f"detections: {n}{' (per image)' if len(counts) > 1 else ''}.")
    without, with_ = flat_array(result.output_without), flat_array(result.output_with)
    if without.shape != with_.shape:
        return (f"The intervention changed the output's shape ({without.size} values without, "
                f"{with_.size} with).")
    d = result.max_abs_diff
    text = (f"The intervention{'s' if len(intervened) > 1 else ''} ({names}) changed the output: "
            f"largest change |Δ| = {'∞' if math.isinf(d) else f'{d:.4g}'}.")
    if 1 < without.size <= MAX_ARGMAX and np.isfinite(without).all() and np.isfinite(with_).all():
        a, b = int(np.argmax(without)), int(np.argmax(with_))
        text += (f" The largest output is still {_named(result, a, without.size)}." if a == b else
                 f" The largest output moved from {_named(result, a, without.size)} to "
                 f"{_named(result, b, without.size)}.")
    return text


def _named(result: Any, index: int, size: int) -> str:
    """``#4``, or ``#4 (e)`` where the model's classes are named (``labels=``) and the output
    is one row of them (a flat index into a batch is no class)."""
    meaning = result.meaning
    labels = getattr(meaning, "labels", None)
    shape = getattr(result.output_with, "shape", None)
    one_row = shape is not None and (len(shape) == 1 or (len(shape) == 2 and shape[0] == 1))
    if labels is None or not one_row or len(labels) != size:
        return f"#{index}"
    return f"#{index} ({meaning.label(index)})"


def identical_despite_intervention(result: Any, intervened: dict) -> str:
    """Why a plan that intervenes left the output unchanged, from what was captured."""
    changed: list[tuple[str, float, Any]] = []
    untouched: list[tuple[str, float, Any]] = []
    for path, recs in result.captures.items():
        for rec in recs:
            # Every tensor leaf of a nested output counts (an LSTM's c may change while out does not).
            fracs = [(path + r.leaf if rec.extra_leaves else path, r.stats.fraction_changed)
                     for r in rec.leaves if r.intervention and r.stats is not None
                     and r.stats.fraction_changed is not None]
            changed.extend((name, f, rec.intervention) for name, f in fracs if f > 0)
            if fracs and not any(f > 0 for _, f in fracs):
                untouched.append((path, 0.0, rec.intervention))
    if changed:
        parts = first_few([f"{iv} changed {100 * f:.3g}% of {p}'s values" for p, f, iv in changed])
        return (f"Outputs are identical, although {parts}: later layers absorbed the change "
                "(e.g. a ReLU or max-pool that ignores those values).")
    if untouched:
        parts = first_few([f"{iv} on {p}" for p, _, iv in untouched])
        return (f"Outputs are identical: {parts} changed no value (for a clamp: no value lay "
                "outside its bounds; narrow the range to see an effect).")
    names = first_few(list(intervened))
    return ("Outputs are identical: either the intervention changed no value, or later layers "
            f"absorbed the change. Capture {names} to see which.")
