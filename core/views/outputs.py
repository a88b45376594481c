"""A model's output read by what it means: classes, next tokens, detections, named leaves.

:func:`describe_outputs` turns the baseline and intervened outputs of a
comparison into small plain data (JSON-ready) that says what changed in the
model's own terms:

- class scores: the top-k classes with labels and probabilities, without
  and with the plan, and the classes whose probability moved most;
- token scores (a language model): per position the input token and the
  top-k next tokens with probabilities without/with, and the positions where
  the top token changed;
- detections (a list of dicts of boxes/labels/scores): per image and field,
  never flattened into one series;
- anything else: each tensor leaf by its name (``['logits']``, ``[0]``),
  with a summary and its largest changes first, readable at any size.

Pure torch, no Qt; sizes stay small whatever the output's size.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from ..base.call_args import CallArgs
from .detections import as_torchvision
from ..base.nested import tensor_leaves
from ..base.meaning import CLASSES, DETECTIONS, TOKENS, OutputMeaning, score_leaf
from ..base.errors import HookscopeError
from ..model.inputs import IMAGE_SUFFIXES, parse_input

TOP_K = 5
MAX_POSITIONS = 64     # token positions listed (the last ones: where the prompt ends)
MAX_ROWS = 8           # batch rows / images listed


def _r(x: "float | torch.Tensor", n: int = 4) -> float:
    return round(float(x), n)


def describe_outputs(without: Any, with_: Any, meaning: OutputMeaning | None = None,
                     inputs: Any = None, top_k: int = TOP_K) -> dict[str, Any]:
    """What the two outputs say, by ``meaning`` (see the module docstring)."""
    meaning = meaning or OutputMeaning()
    if meaning.kind == DETECTIONS:
        a_det, b_det = as_torchvision(without, inputs), as_torchvision(with_, inputs)
        if a_det is not None and b_det is not None:  # torchvision's list of dicts, or DETR's
            return detections(a_det, b_det, meaning, top_k)
    a, b = score_leaf(without, meaning), score_leaf(with_, meaning)
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.shape == b.shape:
        if meaning.kind == TOKENS and a.dim() == 3:
            return tokens(a, b, meaning, token_ids(inputs), top_k)
        if meaning.kind == CLASSES and a.dim() == 2:
            return classes(a, b, meaning, top_k)
    return {**leaves(without, with_, top_k), "notes": list(meaning.notes)}


def _probs(logits: torch.Tensor) -> torch.Tensor:
    return torch.softmax(logits.detach().double(), dim=-1)


def _top(p: torch.Tensor, k: int, name) -> list[dict[str, Any]]:
    vals, idx = p.topk(min(k, p.numel()))
    return [{"index": int(i), "label": name(int(i)), "prob": _r(v)} for v, i in zip(vals, idx)]


def classes(a: torch.Tensor, b: torch.Tensor, meaning: OutputMeaning, k: int) -> dict[str, Any]:
    """Top-k classes without/with per batch row, and the largest probability changes."""
    pa, pb = _probs(a), _probs(b)
    rows = []
    for r in range(min(a.shape[0], MAX_ROWS)):
        d = pb[r] - pa[r]
        moved = d.abs().topk(min(k, d.numel())).indices
        top_a, top_b = int(pa[r].argmax()), int(pb[r].argmax())
        rows.append({
            "top_without": _top(pa[r], k, meaning.label),
            "top_with": _top(pb[r], k, meaning.label),
            "top_changed": top_a != top_b,
            "top_class_prob_change": _r(pb[r, top_a] - pa[r, top_a]),
            "largest_changes": [{"index": int(i), "label": meaning.label(int(i)),
                                 "without": _r(pa[r, i]), "with": _r(pb[r, i]), "change": _r(d[i])}
                                for i in moved if float(d[i]) != 0.0],
        })
    notes = list(meaning.notes)
    if meaning.labels is not None and len(meaning.labels) != a.shape[-1]:
        notes.append(f"the labels name {len(meaning.labels)} classes but the output has "
                     f"{a.shape[-1]}: check the labels file (unnamed classes show their index)")
    return {"kind": CLASSES, "classes": a.shape[-1], "rows": rows, "notes": notes}


def token_ids(inputs: Any) -> torch.Tensor | None:
    """The ``(batch, seq)`` token ids of an input, where it has them."""
    if isinstance(inputs, dict):
        inputs = inputs.get("input_ids")
    elif isinstance(inputs, CallArgs):
        inputs = inputs.args[0] if inputs.args else inputs.kwargs.get("input_ids")
    elif isinstance(inputs, tuple) and inputs:
        inputs = inputs[0]
    if isinstance(inputs, torch.Tensor) and inputs.dim() == 2 and not inputs.is_floating_point():
        return inputs
    return None


def tokens(a: torch.Tensor, b: torch.Tensor, meaning: OutputMeaning, ids: torch.Tensor | None,
           k: int) -> dict[str, Any]:
    """Per position: the input token, top-k next tokens without/with; where the top changed."""
    codec = meaning.codec
    name = (lambda i: codec.token_strings([i])[0]) if codec is not None else str
    pa, pb = _probs(a[0]), _probs(b[0])  # first sequence of the batch
    seq = a.shape[1]
    top_a, top_b = pa.argmax(-1), pb.argmax(-1)
    changed = [int(p) for p in torch.nonzero(top_a != top_b).flatten()]
    shown = range(max(0, seq - MAX_POSITIONS), seq)
    inp = ids[0].tolist() if ids is not None and ids.shape[-1] == seq else None
    strings = codec.token_strings(inp) if codec is not None and inp is not None else None
    positions = []
    for p in shown:
        tv = _probs(a[0, p])[top_a[p]]
        positions.append({
            "position": p,
            "input": strings[p] if strings else (inp[p] if inp else None),
            "top_without": _top(pa[p], k, name),
            "top_with": _top(pb[p], k, name),
            "top_changed": p in changed,
            "top_token_prob_change": _r(pb[p, top_a[p]] - tv),
        })
    return {"kind": TOKENS, "vocab": a.shape[-1], "positions_total": seq,
            "predicts": "next token" if meaning.causal else "token at each position",
            "changed_positions": changed, "positions": positions,
            "notes": list(meaning.notes)}


def _field(d: dict, key: str) -> torch.Tensor | None:
    v = d.get(key)
    return v.detach() if isinstance(v, torch.Tensor) else None


def detections(a: list, b: list, meaning: OutputMeaning, k: int) -> dict[str, Any]:
    """Per image: the top-k detections (box, label, score) without/with, field by field."""
    def listed(d: dict) -> list[dict[str, Any]]:
        scores, boxes, labels = _field(d, "scores"), _field(d, "boxes"), _field(d, "labels")
        if scores is None or not scores.numel():
            return []
        order = scores.argsort(descending=True)[:k].tolist()
        return [{"score": _r(scores[i]),
                 "label": meaning.label(int(labels[i])) if labels is not None else None,
                 "box": [_r(v, 1) for v in boxes[i].tolist()] if boxes is not None else None}
                for i in order]

    images = []
    for i in range(min(len(a), len(b), MAX_ROWS)):
        da, db = a[i], b[i]
        if not isinstance(da, dict) or not isinstance(db, dict):
            return leaves(a, b, k)
        fields = {}
        for key in sorted(set(da) | set(db)):
            ta, tb = _field(da, key), _field(db, key)
            fields[key] = {"without": list(ta.shape) if ta is not None else None,
                           "with": list(tb.shape) if tb is not None else None,
                           "same": bool(ta is not None and tb is not None and ta.shape == tb.shape
                                        and torch.equal(ta, tb))}
        sa, sb = _field(da, "scores"), _field(db, "scores")
        images.append({"count_without": len(sa) if sa is not None else 0,
                       "count_with": len(sb) if sb is not None else 0,
                       "top_without": listed(da), "top_with": listed(db), "fields": fields})
    return {"kind": DETECTIONS, "images": images, "notes": list(meaning.notes)}


def _index(flat: int, shape: tuple[int, ...]) -> list[int]:
    out = []
    for s in reversed(shape):
        out.append(flat % s if s else 0)
        flat //= s if s else 1
    return list(reversed(out))


def leaves(a: Any, b: Any, k: int) -> dict[str, Any]:
    """Each tensor leaf by name: shape, range, largest |change| and where (largest first)."""
    la, lb = dict(tensor_leaves(a)), dict(tensor_leaves(b))
    out = []
    for key in list(dict.fromkeys([*la, *lb])):
        ta, tb = la.get(key), lb.get(key)
        entry: dict[str, Any] = {"name": key or "output",
                                 "shape": list(ta.shape) if ta is not None else None}
        if ta is None or tb is None or ta.shape != tb.shape:
            entry["note"] = "present in one output only, or of another shape"
            out.append(entry)
            continue
        da, db = ta.detach().double().reshape(-1), tb.detach().double().reshape(-1)
        if da.numel():
            entry.update(min=_r(da.min(), 6), max=_r(da.max(), 6), mean=_r(da.mean(), 6))
        diff = (db - da).abs().nan_to_num(nan=float("inf"))
        changed = int((diff != 0).sum())
        entry["changed_values"] = changed
        entry["max_abs_diff"] = _r(diff.max(), 6) if diff.numel() else 0.0
        if changed:
            vals, idx = diff.topk(min(k, changed))
            entry["largest_changes"] = [{"index": _index(int(i), tuple(ta.shape)),
                                         "without": _r(da[i], 6), "with": _r(db[i], 6)}
                                        for i in idx]
        out.append(entry)
    return {"kind": "leaves", "leaves": out}


def summary_lines(desc: dict[str, Any]) -> list[str]:
    """A few lines for a terminal table."""
    kind = desc.get("kind")
    fmt = lambda top: ", ".join(f"{t['label']} {t['prob']:.3f}" for t in top)
    lines: list[str] = []
    if kind == CLASSES:
        for r, row in enumerate(desc["rows"]):
            lines.append(f"top classes [{r}]  without: {fmt(row['top_without'])}")
            lines.append(f"{'':17}with:    {fmt(row['top_with'])}"
                         + ("   (top class changed)" if row["top_changed"] else ""))
    elif kind == TOKENS:
        for pos in desc["positions"][-6:]:
            lines.append(f"pos {pos['position']:>3} {str(pos['input'])!s:>10} -> without: "
                         f"{fmt(pos['top_without'][:3])} | with: {fmt(pos['top_with'][:3])}"
                         + ("  *" if pos["top_changed"] else ""))
        ch = desc["changed_positions"]
        lines.append(f"top token changed at {len(ch)} of {desc['positions_total']} positions"
                     + (f": {ch[:20]}" if ch else ""))
    elif kind == DETECTIONS:
        for i, img in enumerate(desc["images"]):
            count = lambda n: f"{n} detection{'s' if n != 1 else ''}" if n else "no boxes"
            lines.append(f"image {i}: {count(img['count_without'])} without, "
                         f"{count(img['count_with'])} with")
    else:
        for leaf in desc.get("leaves", [])[:12]:
            lines.append(f"{leaf['name']:<24} shape {leaf['shape']}  changed "
                         f"{leaf.get('changed_values', '-')}  max |diff| {leaf.get('max_abs_diff', '-')}")
    return lines + [f"note: {n}" for n in desc.get("notes", [])]


def inputs_for_display(text: str, example: Any, codec: Any = None) -> Any:
    """The input behind ``text`` when knowing it is cheap (the example, a ``text:`` prompt,
    a literal), for showing input tokens; ``None`` for files and anything that fails."""

    t = (text or "").strip()
    if t in ("", "example"):
        return example

    if t.startswith(("text:", "[", "{", "(")) or t.lower().removesuffix(":invert").endswith(
            IMAGE_SUFFIXES):
        try:
            return parse_input(text, example, codec)
        except HookscopeError:
            return None
    return None


def input_image(inputs: Any) -> "Any | None":
    """The first image of an image input as ``H x W x C`` uint8 (C = 1 or 3), for a thumbnail.

    Values are stretched to 0-255 over their own range, so a normalised input
    (ImageNet mean/std) still looks like the picture. ``None`` when the input
    is not an image batch (``N x C x H x W`` with C in 1, 3; ``pixel_values``;
    or a detector's list of ``C x H x W`` images).
    """
    if isinstance(inputs, dict):
        inputs = inputs.get("pixel_values")
    if isinstance(inputs, list) and inputs and isinstance(inputs[0], torch.Tensor):
        inputs = inputs[0].unsqueeze(0)
    if not (isinstance(inputs, torch.Tensor) and inputs.dim() == 4 and inputs.is_floating_point()
            and inputs.shape[1] in (1, 3) and min(inputs.shape[2:]) >= 4):
        return None
    img = inputs[0].detach().float().cpu()
    lo, hi = float(img.min()), float(img.max())
    img = (img - lo) / (hi - lo) if hi > lo else torch.zeros_like(img)
    return np.ascontiguousarray((img.permute(1, 2, 0).numpy() * 255).round().astype(np.uint8))


def input_token_strings(inputs: Any, meaning: OutputMeaning | None) -> list[str] | None:
    """The first sequence's token strings of a token input, when the model has a tokenizer."""
    ids = token_ids(inputs)
    if ids is None or meaning is None or meaning.codec is None or ids.shape[0] < 1:
        return None
    return meaning.codec.token_strings(ids[0].tolist())
