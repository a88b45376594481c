"""What one sweep cell measures, from the output's meaning.

``logit-diff:A,B`` (logit of token A minus token B at the last position), ``logit:T``,
``prob:T`` (a token's text, a class's label, or ``#N`` for index N), ``kl`` (KL divergence of
the intervened prediction from the baseline's, at the last position), ``top-changed`` (1
where the top prediction changed, else 0), ``max-abs-diff`` (the largest |Δ| anywhere in
the output), for a detector (torchvision's boxes/labels/scores, or DETR's) ``box-count``
(boxes scoring at least 0.5 in the first image; ``box-count:0.3`` another threshold) and
``top-score`` (the best box's score, 0 without boxes; ``top-score:LABEL`` of one class), or
any callable on ``(output_without, output_with)`` returning a number.

:func:`normalised` puts values between a clean and a source run as activation-patching
papers do: ``(m - m_clean) / (m_source - m_clean)``, 0 where the cell behaves as the clean
run and 1 where it behaves as the source run.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
import torch

from ..base.errors import PlanError
from ..base.meaning import OutputMeaning, score_leaf
from ..base.nested import tensor_leaves
from ..base.user_text import is_digits
from ..views.detections import as_torchvision
from ..engine.output_diff import output_difference

METRICS = ("logit-diff:A,B", "logit:T", "prob:T", "kl", "top-changed", "max-abs-diff",
           "box-count[:MIN_SCORE]", "top-score[:LABEL]")
#: The score a box needs to count in ``box-count`` (the detection view's default threshold).
BOX_SCORE = 0.5


class NoScores(PlanError):
    """The model's output holds no floating-point scores for a metric to read."""


def scores(output: Any, meaning: OutputMeaning | None, detach: bool = True) -> torch.Tensor:
    """The score vector a metric reads: the first example's, at the last position for a
    sequence of scores (``[batch, positions, vocabulary]``). ``detach=False``: still in the
    autograd graph (a sweep's estimate differentiates it)."""
    leaf = score_leaf(output, meaning)
    leaves = [leaf] if isinstance(leaf, torch.Tensor) else [t for _, t in tensor_leaves(leaf)]
    if not leaves or not leaves[0].is_floating_point():
        raise NoScores("this metric needs scores (logits) as the output; use max-abs-diff or "
                       "a function for this model")
    t = leaves[0].detach() if detach else leaves[0]
    # the one row read, then float64 (a GPT-2's logits are 50257 a position: converting
    # them all first cost more than the rest of a cell's bookkeeping)
    if t.dim() >= 3:
        return t[0, -1].double()
    if t.dim() == 2:
        return t[0].double()
    return t.reshape(-1).double()


def _index(text: str, meaning: OutputMeaning | None, what: str) -> int:
    t = text.strip()
    if t.startswith("#") and is_digits(t[1:]):
        return int(t[1:])
    labels = meaning.labels if meaning is not None else None
    if labels and t in labels:
        return labels.index(t)
    codec = meaning.codec if meaning is not None else None
    if codec is not None:
        ids = codec.encode(text)
        if len(ids) == 1:
            return int(ids[0])
        raise PlanError(f"{what}: {text!r} is {len(ids)} tokens, not one; name one token "
                        "(or #ID)")
    raise PlanError(f"{what}: {text!r} is no class label of this model; write #N for index N")


def _unquote(text: str) -> str:
    t = text
    if len(t) >= 2 and t[0] == t[-1] and t[0] in "'\"":
        return t[1:-1]
    return t


@dataclass(frozen=True)
class Metric:
    """A cell's number from the two outputs; ``clean``: the same number on the baseline run
    (``None`` where only a difference makes sense). ``grad``: the cell's number as a tensor
    still in the autograd graph of the second output (a sweep's estimate differentiates it);
    ``None`` with ``no_grad`` saying why the metric has no first-order signal."""

    name: str
    cell: Callable[[Any, Any], float]
    clean: Callable[[Any], float] | None = None
    grad: Callable[[Any, Any], torch.Tensor] | None = None
    no_grad: str = ""


def _checked(i: int, n: int, what: str) -> int:
    if not 0 <= i < n:
        raise PlanError(f"{what}: index {i} is outside the {n} scores of the output")
    return i


def make_metric(metric: Any, meaning: OutputMeaning | None) -> Metric:
    """A :class:`Metric` from a name above or a callable."""
    if callable(metric):
        name = getattr(metric, "__name__", "custom")

        def call(a: Any, b: Any) -> float:
            return float(metric(a, b))

        return Metric(str(name), call, grad=metric)
    if not isinstance(metric, str) or not metric.strip():
        raise PlanError(f"metric {metric!r}: use one of {', '.join(METRICS)} or a function")
    kind, _, arg = metric.strip().partition(":")
    what = f"metric {metric!r}"
    sc = lambda out: scores(out, meaning)  # noqa: E731
    if kind == "max-abs-diff":
        return Metric(metric, lambda a, b: output_difference(a, b)[1],
                      no_grad="max-abs-diff is a largest absolute difference: its gradient is "
                              "zero (or undefined) at the baseline")
    if kind == "kl":
        def kl(a: Any, b: Any) -> float:
            p, q = torch.log_softmax(sc(a), -1), torch.log_softmax(sc(b), -1)
            return float((p.exp() * (p - q)).sum())
        return Metric(metric, kl, no_grad="kl from the baseline is at its minimum there, so its "
                                          "gradient is zero")
    if kind == "top-changed":
        return Metric(metric, lambda a, b: float(int(sc(a).argmax()) != int(sc(b).argmax())),
                      no_grad="top-changed counts an argmax change: its gradient is zero")
    if kind == "logit-diff":
        parts = [p for p in arg.split(",")]
        if len(parts) != 2 or not all(p.strip() for p in parts):
            raise PlanError(f"{what}: write logit-diff:A,B with two tokens or classes, "
                            "e.g. logit-diff:' Paris',' Rome' or logit-diff:#3,#5")
        ia, ib = (_index(_unquote(p.strip()), meaning, what) for p in parts)

        def diff_of(s: torch.Tensor) -> torch.Tensor:
            return s[_checked(ia, len(s), what)] - s[_checked(ib, len(s), what)]

        def diff(out: Any) -> float:
            return float(diff_of(sc(out)))
        return Metric(metric, lambda a, b: diff(b), diff,
                      grad=lambda a, b: diff_of(scores(b, meaning, detach=False).double()))
    if kind in ("prob", "logit"):
        if not arg.strip():
            raise PlanError(f"{what}: write {kind}:TOKEN, {kind}:LABEL or {kind}:#N")
        i = _index(_unquote(arg.strip()), meaning, what)

        def value_of(s: torch.Tensor) -> torch.Tensor:
            _checked(i, len(s), what)
            return torch.softmax(s, -1)[i] if kind == "prob" else s[i]

        def value(out: Any) -> float:
            return float(value_of(sc(out)))
        return Metric(metric, lambda a, b: value(b), value,
                      grad=lambda a, b: value_of(scores(b, meaning, detach=False).double()))
    if kind in ("box-count", "top-score"):
        return _detector_metric(metric, kind, arg, meaning)
    raise PlanError(f"metric {metric!r}: use one of {', '.join(METRICS)} or a function")


def detections(output: Any) -> dict[str, torch.Tensor]:
    """The first image's detections of a detector's output: ``{"scores": (N,), "labels": (N,)}``."""
    found = as_torchvision(output)
    if not found:
        raise PlanError("box-count and top-score need a detector's output (boxes, labels, "
                        "scores per image); use max-abs-diff or a function for this model")
    d = found[0]
    boxes = d.get("boxes")
    n = int(boxes.reshape(-1, 4).shape[0]) if isinstance(boxes, torch.Tensor) else 0
    scores = d.get("scores")
    labels = d.get("labels")
    return {"scores": (scores.detach().double().cpu().reshape(-1) if isinstance(scores, torch.Tensor)
                       else torch.ones(n, dtype=torch.float64)),
            "labels": (labels.detach().cpu().reshape(-1) if isinstance(labels, torch.Tensor)
                       else torch.full((n,), -1))}


def _detector_metric(metric: str, kind: str, arg: str, meaning: OutputMeaning | None) -> Metric:
    what = f"metric {metric!r}"
    if kind == "box-count":
        threshold = BOX_SCORE
        if arg.strip():
            try:
                threshold = float(arg)
            except ValueError:
                raise PlanError(f"{what}: write box-count or box-count:MIN_SCORE with a number, "
                                "e.g. box-count:0.3") from None
            if not math.isfinite(threshold):
                raise PlanError(f"{what}: the minimum score must be a finite number")

        def count(out: Any) -> float:
            return float(int((detections(out)["scores"] >= threshold).sum()))
        return Metric(metric, lambda a, b: count(b), count,
                      no_grad="box-count counts boxes over a threshold: its gradient is zero")
    label = _index(_unquote(arg.strip()), meaning, what) if arg.strip() else None

    def top(out: Any) -> float:
        d = detections(out)
        s = d["scores"] if label is None else d["scores"][d["labels"] == label]
        return float(s.max()) if s.numel() else 0.0
    return Metric(metric, lambda a, b: top(b), top,
                  no_grad="top-score reads a detector's box lists, which thresholds and "
                          "non-maximum suppression choose: not differentiable")


def normalised(values: np.ndarray, m_clean: float, m_source: float) -> np.ndarray:
    """``(values - m_clean) / (m_source - m_clean)``; NaN everywhere when the two runs give
    the same number (nothing to normalise by)."""
    span = m_source - m_clean
    if span == 0 or not math.isfinite(span):
        return np.full_like(values, np.nan, dtype=float)
    return (np.asarray(values, dtype=float) - m_clean) / span


def finite_or_none(v: float | None) -> float | None:
    return v if v is not None and math.isfinite(v) else None
