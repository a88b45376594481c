"""How numbers and shapes are written in the window: clamp bounds (with their
open ends as ∞), statistics, shapes; and how a typed bound is read back."""

from __future__ import annotations

import math
from typing import Any


def format_bound(v: float) -> str:
    """A clamp bound as shown in a cell: ``∞``/``−∞`` for the open ends."""
    if math.isinf(v):
        return "∞" if v > 0 else "−∞"
    return f"{v:g}"


def parse_bound(value: Any) -> float | None:
    """A cell's new value as a float; ``None`` for empty. Raises ``ValueError``."""
    if value is None:
        return None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        v = float(value)
    else:
        text = str(value).strip().replace("−", "-").replace("∞", "inf")
        if not text:
            return None
        v = float(text)  # raises ValueError on "abc"
    if math.isnan(v):
        raise ValueError("NaN")
    return v


def format_shape(shape: tuple[int, ...] | None) -> str:
    if shape is None:
        return ""
    return "×".join(str(d) for d in shape) if shape else "scalar"


def format_value(v: float) -> str:
    """``v`` in 4 significant digits; a zero is never signed (-0.0 + 0.0 is 0.0)."""
    return format_bound(v) if math.isinf(v) else f"{v + 0.0:.4g}"
