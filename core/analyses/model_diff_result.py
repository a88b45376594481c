"""What a model diff answers: one row per aligned layer call, the first past the tolerance,
the layers only one model has, and how the two outputs differ (by what they mean).

:class:`DiffRow` is one call of one leaf module in both models: the largest ``|a - b|``,
the relative change ``||a - b|| / ||a||`` and the cosine of the two outputs (over every
floating tensor leaf of the call's output). :class:`DiffResult` holds the rows in the
order model A's calls finished, and :meth:`DiffResult.to_json_dict` writes them as
``hookscope diff --json`` prints them. :func:`compare_outputs` reads the two models'
outputs by the model's meaning: a language model's next-token distributions (KL(A‖B) per
position and how often the top token agrees), a classifier's top-k lists.
"""

from __future__ import annotations

import csv
import io
import math
from dataclasses import dataclass, field
from typing import Any

import torch

from ..base.meaning import CLASSES, TOKENS, OutputMeaning, score_leaf
from ..base.nested import tensor_leaves
from ..engine import fast_slot
from ..engine.output_diff import output_change

#: Classes listed per row for a classifier's output.
TOP_K = 5


def _num(v: float | None) -> float | None:
    """A JSON-safe number: ``None`` for NaN (an infinity stays; json_dumps writes it as null)."""
    return None if v is None or v != v else float(v)


@dataclass(frozen=True)
class DiffRow:
    """One aligned call: ``path``'s ``call``-th output in model A against the same in B.

    ``cosine`` is ``None`` where it has no meaning (an all-zero output, shapes that
    differ); ``note`` says why a row is not a plain comparison (shapes that differ)."""

    path: str
    call: int
    max_abs_diff: float
    relative_change: float
    cosine: float | None
    note: str | None = None

    def passes(self, tolerance: float) -> bool:
        """Whether this row's relative change passes ``tolerance`` (NaN counts as passing)."""
        r = self.relative_change
        return r != r or r > tolerance

    def to_json_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"path": self.path, "call": self.call,
                             "max_abs_diff": _num(self.max_abs_diff),
                             "relative_change": _num(self.relative_change),
                             "cosine": _num(self.cosine)}
        if self.note:
            d["note"] = self.note
        return d


@dataclass(frozen=True)
class DiffResult:
    """Two models compared layer by layer on one input (see the module docstring).

    ``directions``: ``{layer: mean of B's output minus A's}`` for the layers asked
    (``--save-direction``), 1-d float32 on the CPU. ``notes``: what a person should know
    (a layer whose calls did not all align, a model B converted to another dtype)."""

    layers: tuple[DiffRow, ...]
    tolerance: float
    only_in_a: tuple[str, ...] = ()
    only_in_b: tuple[str, ...] = ()
    output: dict[str, Any] = field(default_factory=dict)
    directions: dict[str, torch.Tensor] = field(default_factory=dict, compare=False, repr=False)
    notes: tuple[str, ...] = ()

    @property
    def first_divergent(self) -> DiffRow | None:
        """The first row (in A's order) whose relative change passes the tolerance."""
        return next((r for r in self.layers if r.passes(self.tolerance)), None)

    def to_json_dict(self) -> dict[str, Any]:
        first = self.first_divergent
        return {
            "layers": [r.to_json_dict() for r in self.layers],
            "first_divergent": None if first is None else {
                "path": first.path, "call": first.call,
                "relative_change": _num(first.relative_change)},
            "tolerance": self.tolerance,
            "only_in_a": list(self.only_in_a),
            "only_in_b": list(self.only_in_b),
            "output": self.output,
            "notes": list(self.notes),
        }

    def to_csv(self) -> str:
        """One line per row: path, call, max_abs_diff, relative_change, cosine."""
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(["path", "call", "max_abs_diff", "relative_change", "cosine"])
        for r in self.layers:
            w.writerow([r.path, r.call, r.max_abs_diff, r.relative_change,
                        "" if r.cosine is None else r.cosine])
        return buf.getvalue()


@dataclass
class PairSums:
    """Running sums over the tensor leaves of one call: ``max |a - b|``, ``||a - b||²``,
    ``||a||²``, ``||b||²`` and ``a·b``, each leaf in the wider of the two dtypes (float32
    at least, so a bfloat16 model B is compared in float32). Float32 and bfloat16 leaves on
    the CPU are read once by the compiled kernel where it is plugged in
    (:mod:`~hookscope.core.engine.fast_slot`); otherwise five torch passes over a leaf: the
    difference, its extremes and the three squared norms."""

    worst: float = 0.0
    dsq: float = 0.0
    asq: float = 0.0
    bsq: float = 0.0
    dot: float = 0.0
    note: str | None = None

    def add(self, a: torch.Tensor, b: torch.Tensor) -> None:
        if a.shape != b.shape:
            self.note = f"shapes differ: {tuple(a.shape)} in A, {tuple(b.shape)} in B"
            self.worst = self.dsq = math.inf
            return
        if a.is_complex() or b.is_complex():
            a, b = torch.view_as_real(a), torch.view_as_real(b)
        if a.numel() == 0:
            return
        kernel = fast_slot.kernel()
        got = kernel.pair_sums(a, b) if kernel is not None else None
        if got is not None:  # float32/bfloat16 on the CPU, all finite: one read of each
            worst, dsq, asq, bsq, dot = got
            self.worst = max(self.worst, worst + 0.0)
            self.dsq += dsq
            self.asq += asq
            self.bsq += bsq
            self.dot += dot
            return
        wide = torch.promote_types(torch.promote_types(a.dtype, b.dtype), torch.float32)
        fa, fb = a.reshape(-1).to(wide), b.reshape(-1).to(device=a.device, dtype=wide)
        b_sq = torch.dot(fb, fb)
        # d = b - a, in B's widened copy where it is one (no more memory than that copy)
        d = fb.sub_(fa) if fb.data_ptr() != b.data_ptr() else fb - fa
        # one transfer for the five numbers (one synchronisation on an accelerator); amax and
        # amin are cheaper than aminmax or abs().max() on the CPU
        top, bottom, dsq, asq, bsq = torch.stack(
            [d.amax(), -d.amin(), torch.dot(d, d), torch.dot(fa, fa), b_sq]).tolist()
        worst = max(top, bottom) + 0.0  # never -0.0
        if worst != worst or dsq != dsq:  # NaN: NaN beside NaN and the same infinity are equal
            _, worst, _ = output_change(a, b.to(a.device), relative=False)
            fb = b.reshape(-1).to(device=a.device, dtype=wide)
            d = d.masked_fill((fa == fb) | (fa.isnan() & fb.isnan()), 0.0)
            fa, fb = fa.nan_to_num(nan=0.0), fb.nan_to_num(nan=0.0)
            dsq, asq, bsq = (float(torch.dot(d, d)), float(torch.dot(fa, fa)),
                             float(torch.dot(fb, fb)))
        self.worst = max(self.worst, worst)
        self.dsq += dsq
        self.asq += asq
        self.bsq += bsq
        # a·b from the three squares: the cosine is read to ~1e-7, far below what it tells
        self.dot += (asq + bsq - dsq) / 2

    def row(self, path: str, call: int) -> DiffRow:
        if self.note is not None:
            return DiffRow(path, call, math.inf, math.inf, None, self.note)
        if self.dsq == 0.0:
            rel = 0.0
        else:
            rel = math.sqrt(self.dsq / self.asq) if self.asq > 0 else math.inf
        den = math.sqrt(self.asq * self.bsq)
        cos = max(-1.0, min(1.0, self.dot / den)) if den > 0 and math.isfinite(den) else None
        return DiffRow(path, call, self.worst, rel, cos)


def _top(probs: torch.Tensor, meaning: OutputMeaning, k: int) -> list[dict[str, Any]]:
    vals, idx = probs.topk(min(k, probs.numel()))
    return [{"index": int(i), "label": meaning.label(int(i)), "prob": round(float(v), 6)}
            for v, i in zip(vals, idx)]


def _change(out_a: Any, out_b: Any) -> tuple[float | None, float | None]:
    """``(max |a - b|, ||a - b|| / ||a||)`` of two outputs: as a layer row where their floating
    leaves pair up (the same names and shapes), else by the engine's output difference."""
    la, lb = tensor_leaves(out_a), tensor_leaves(out_b)
    fa = [(k, t) for k, t in la if t.is_floating_point()]
    fb = [(k, t) for k, t in lb if t.is_floating_point()]
    if ([k for k, _ in la] == [k for k, _ in lb] and [k for k, _ in fa] == [k for k, _ in fb]
            and all(a.shape == b.shape for (_, a), (_, b) in zip(fa, fb))
            and all(torch.equal(a, b) for (_, a), (_, b) in zip(la, lb)
                    if not a.is_floating_point())):
        sums = PairSums()
        for (_, a), (_, b) in zip(fa, fb):
            sums.add(a, b)
        row = sums.row("", 0)
        return _num(row.max_abs_diff), _num(row.relative_change)
    _differ, worst, rel = output_change(out_a, out_b)
    return _num(worst), _num(rel)


def compare_outputs(out_a: Any, out_b: Any, meaning: OutputMeaning | None) -> dict[str, Any]:
    """The two models' outputs compared: ``max_abs_diff``, ``relative_change`` and, by the
    output's meaning, ``kl_per_position`` (one list per batch row: KL(A‖B) of the next-token
    distributions at each position, in nats) with ``top1_agreement`` (the fraction of
    positions whose top token agrees) for a language model, or ``top_a``/``top_b`` (the
    top-k classes per batch row) for a classifier."""
    got: dict[str, Any] = dict(zip(("max_abs_diff", "relative_change"), _change(out_a, out_b)))
    meaning = meaning or OutputMeaning()
    a, b = score_leaf(out_a, meaning), score_leaf(out_b, meaning)
    if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.shape == b.shape
            and a.is_floating_point() and b.is_floating_point()):
        return got
    if meaning.kind == TOKENS and a.dim() == 3:
        la = torch.log_softmax(a.double(), dim=-1)
        lb = torch.log_softmax(b.double(), dim=-1)
        kl = (la.exp() * (la - lb)).sum(-1)
        got["kl_per_position"] = [[_num(v) for v in row] for row in kl.tolist()]
        got["top1_agreement"] = float((a.argmax(-1) == b.argmax(-1)).double().mean())
    elif meaning.kind == CLASSES and a.dim() == 2:
        pa, pb = torch.softmax(a.double(), -1), torch.softmax(b.double(), -1)
        got["top_a"] = [_top(pa[r], meaning, TOP_K) for r in range(a.shape[0])]
        got["top_b"] = [_top(pb[r], meaning, TOP_K) for r in range(b.shape[0])]
        got["top1_agreement"] = float((a.argmax(-1) == b.argmax(-1)).double().mean())
    return got
