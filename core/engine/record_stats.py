"""Statistics of one captured call compared across its versions: before, after, baseline.

A captured layer call can have up to three values: the baseline run's
output, the intervened run's output before this layer's intervention, and
after it. Their histograms share one range (the union of their finite
ranges) so that they compare bin by bin: a clamp's values show as spikes at
the bounds, a scaled output as a stretched shape, a downstream layer's
change against its baseline. What fraction of the values an intervention
changed is counted here for every kind (``pre != post``, NaN equal to NaN),
so nothing depends on which kind it was.

Like :mod:`hookscope.core.engine.stats`, work on an accelerator stays on the device
(0-d tensors) until the forward's one transfer; on the CPU it reads back at once.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import torch

from .stats import PendingStats, TensorStats, summarize

Range = tuple  # (lo, hi): floats on the CPU, 0-d float64 tensors on a device


def _values(t: torch.Tensor) -> torch.Tensor:
    """``t`` flattened as :func:`summarize` sees it (complex by magnitude, in float)."""
    flat = t.detach().reshape(-1)
    if flat.is_complex():
        flat = flat.abs()
    if flat.dtype not in (torch.float32, torch.float64):
        flat = flat.float()
    return flat


def value_range(t: torch.Tensor, deferred: bool | None = None) -> Range | None:
    """The finite (min, max) of ``t``; ``None`` when it has no finite value. Off the CPU
    (or ``deferred``) two 0-d device tensors, read back with the forward's one transfer."""
    if t.numel() == 0:
        return None
    flat = _values(t)
    if not (t.device.type != "cpu" if deferred is None else deferred):
        mn, mx = (v.item() for v in torch.aminmax(flat))
        if not (math.isfinite(mn) and math.isfinite(mx)):
            finite = flat[torch.isfinite(flat)]
            if finite.numel() == 0:
                return None
            mn, mx = (v.item() for v in torch.aminmax(finite))
        return (mn, mx)
    finite = torch.isfinite(flat)
    inf = torch.tensor(math.inf, device=flat.device, dtype=flat.dtype)
    dmn = torch.where(finite, flat, inf).amin().to(torch.float64)
    dmx = torch.where(finite, flat, -inf).amax().to(torch.float64)
    return (dmn, dmx)  # ±inf when nothing is finite: summarize then falls back to its own range


def stats_range(s: TensorStats | None) -> Range | None:
    """The histogram range of an already computed summary."""
    if s is None or len(s.hist_edges) < 2 or not math.isfinite(float(s.hist_edges[0])):
        return None
    lo, hi = float(s.hist_edges[0]), float(s.hist_edges[-1])
    return (lo, hi) if hi > lo else None


def shared_range(ranges: Sequence[Range | None]) -> Range | None:
    """The union of ``ranges`` padded like a single tensor's (a constant gets a visible bar)."""
    got = [r for r in ranges if r is not None]
    if not got:
        return None
    on_device = next((v.device for r in got for v in r if isinstance(v, torch.Tensor)), None)
    if on_device is None:
        lo, hi = min(r[0] for r in got), max(r[1] for r in got)
        if hi > lo:
            return (lo, hi)
        pad = max(0.5, abs(lo) * 1e-6)
        return (lo - pad, hi + pad)
    as_t = [tuple(torch.as_tensor(v, dtype=torch.float64, device=on_device) for v in r) for r in got]
    lo = torch.stack([r[0] for r in as_t]).amin()
    hi = torch.stack([r[1] for r in as_t]).amax()
    const = hi <= lo
    pad = torch.clamp(lo.abs() * 1e-6, min=0.5)
    return (torch.where(const, lo - pad, lo), torch.where(const, hi + pad, hi))


def summarize_shared(tensors: Sequence[torch.Tensor | None], extra: Sequence[Range | None] = (),
                     deferred: bool | None = None) -> list[PendingStats | None]:
    """Summaries of ``tensors`` (``None`` entries stay ``None``) binned over one shared range,
    which also spans ``extra`` (e.g. the range of a baseline summarised earlier)."""
    present = [t for t in tensors if t is not None]
    if len(present) + len([e for e in extra if e is not None]) < 2:
        return [summarize(t, deferred=deferred) if t is not None else None for t in tensors]
    rng = shared_range([value_range(t, deferred) for t in present] + list(extra))
    return [summarize(t, hist_range=rng, deferred=deferred) if t is not None else None
            for t in tensors]


def changed_count(pre: torch.Tensor, post: torch.Tensor) -> torch.Tensor | None:
    """How many values differ between ``pre`` and ``post`` (NaN equals NaN); a 0-d
    tensor on their device, or ``None`` when the shapes differ (nothing to compare)."""
    if pre.shape != post.shape:
        return None
    if pre.device != post.device:
        post = post.to(pre.device)
    diff = torch.ne(pre, post)
    if pre.is_floating_point() or pre.is_complex():
        diff &= ~(torch.isnan(pre) & torch.isnan(post))
    return diff.sum()


def fraction(count: torch.Tensor | float | None, n: int) -> float | None:
    if count is None:
        return None
    return float(count) / n if n else 0.0


def reference_of(record: Any) -> tuple[torch.Tensor | None, TensorStats | None, str]:
    """What a view compares a captured call with, and what to call it.

    For the intervened layer: its own output before its intervention
    (``"before"``). For any other captured layer: the same call in the
    baseline run (``"without"``), when the interventions upstream changed it;
    ``(None, None, "")`` when they did not, so an unchanged layer is drawn once.
    A record that compares two models (``record.pair``): model A's values, called
    ``"A"``, always (equal values are the finding, and are drawn as such).
    """
    if record.pair is not None:
        return record.baseline_tensor, record.baseline_stats, "A"
    if record.intervention:
        return record.pre_tensor, record.pre_stats, "before"
    base_t, base_s = record.baseline_tensor, record.baseline_stats
    if base_t is not None and record.tensor is not None:
        if record.matches_baseline():
            return None, None, ""
        return base_t, base_s, "without"
    s = record.stats
    if base_s is not None and s is not None and (base_s.min, base_s.max, base_s.mean, base_s.std) \
            != (s.min, s.max, s.mean, s.std):
        return None, base_s, "without"
    return None, None, ""


def version_names(record: Any) -> tuple[str, str]:
    """What a view calls a record's light and dark series: ``("before", "after")`` its
    own intervention, ``("without", "with")`` the interventions upstream, ``("A", "B")``
    two models (:attr:`~.capture_record.CaptureRecord.pair`)."""
    label = reference_of(record)[2]
    return {"A": ("A", "B"), "without": ("without", "with")}.get(label, ("before", "after"))
