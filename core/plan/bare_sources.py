"""What a bare ``patch`` or ``mean-ablate`` in a template takes, given once for every cell.

A sweep's template may write ``{layer}=patch@pos={pos}`` and give the source input
beside it (``--source-input``, the Sweep dock's Source field) instead of inside each cell.
"""

from __future__ import annotations

from typing import Any

from ..base.errors import PlanError
from .interventions import MeanAblate, Patch


def with_bare_sources(ivs: dict[str, Any], source: str | None, reference: str | None,
                      missing_source: str) -> dict[str, Any]:
    """``ivs`` with each bare ``patch`` given ``source`` and each bare ``mean-ablate`` given
    ``reference`` (where there is one); a bare patch without a ``source`` raises
    :class:`PlanError` with ``missing_source`` (what to fill in, in the caller's words)."""
    out = {}
    for path, iv in ivs.items():
        if isinstance(iv, Patch) and iv.source_input is None:
            if source is None:
                raise PlanError(missing_source)
            iv = Patch(source, at=iv.at)
        if isinstance(iv, MeanAblate) and iv.reference is None and reference:
            iv = MeanAblate(reference, at=iv.at)
        out[path] = iv
    return out
