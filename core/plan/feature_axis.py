"""Which axis of a layer's output holds its features (units, channels).

Both the kinds that take units (:class:`~hookscope.core.plan.interventions.Zero`) and the
``@units=`` selector (:mod:`hookscope.core.plan.aim`) ask this one question. The answer is
written in plain torch in :mod:`.leaf_functions`, so the exported script runs the same lines.
"""

from __future__ import annotations

from .leaf_functions import feature_dim

__all__ = ["feature_dim"]
