"""Counting a tensor's values in given bins, for views that compare two histograms.

The core summarises an intervened layer's values before and after on one shared
range on the worker already (``stats.summarize(..., hist_range=...)``); this is the
same count for any other pair, so a view can draw "before" and "after" over the
same bins.
Pure torch + numpy; never imports Qt.
"""

from __future__ import annotations

import numpy as np
import torch


def histogram_in(t: torch.Tensor, edges: np.ndarray) -> np.ndarray:
    """Counts of ``t``'s finite values in the bins ``edges`` (values beyond the
    ends are counted in the end bins), as floats."""
    v = t.detach().reshape(-1).float().cpu().numpy()
    v = v[np.isfinite(v)]
    counts, _ = np.histogram(np.clip(v, edges[0], edges[-1]), bins=edges)
    return counts.astype(float)
