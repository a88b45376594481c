"""JSON that every parser accepts: NaN and infinities become ``null``.

Python's :mod:`json` writes ``NaN`` and ``Infinity``, which are not JSON
(``jq``, JavaScript and most other readers reject the whole document). Hookscope
writes ``null`` in their place; how many values were NaN or infinite is kept
beside the statistics as ``nan_count`` and ``inf_count``, and an open clamp
bound (``--clamp 0=:0.2``) reads ``null`` for "no bound on that side".
"""

from __future__ import annotations

import json
import math
from typing import Any


def json_safe(value: Any) -> Any:
    """``value`` with every non-finite float replaced by ``None`` (containers copied)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return value


def dumps(value: Any, **kwargs: Any) -> str:
    """``json.dumps`` of :func:`json_safe` ``(value)``; strict, so nothing non-standard slips out."""
    return json.dumps(json_safe(value), allow_nan=False, **kwargs)


def nesting_depth(value: Any, stop_past: int) -> int:
    """How deep ``value`` nests lists and dicts (walked without recursion); the walk stops
    once it is past ``stop_past``."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        v, d = stack.pop()
        if isinstance(v, (list, dict)):
            deepest = max(deepest, d)
            if deepest > stop_past:
                break
            stack.extend((x, d + 1) for x in (v.values() if isinstance(v, dict) else v))
    return deepest
