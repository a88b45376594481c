"""Intervention parameters: what an editor or parser knows about each one
(:class:`Param`, declared with :func:`param`), and how a value is read (from the
command line's text, from JSON or an editor), checked, and written back (JSON,
Python source for the exported script, a short form for descriptions).
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
from dataclasses import dataclass
from typing import Any

import torch

from ..base.errors import PlanError
from ..base.user_text import typed_text


#: Parameter types an editor or parser understands.
PARAM_TYPES = ("float", "int", "units", "dim", "input")


@dataclass(frozen=True)
class Param:
    """What a generated editor or parser knows about one parameter.

    ``type``: ``"float"``, ``"int"``, ``"units"`` (a tuple of ints, written
    ``3,7``), ``"dim"`` (an int axis or ``None``), ``"input"`` (an input spec
    string). ``lo``/``hi``: the valid range (``None``: open). ``start``: the
    value an editor starts from. ``optional``: ``None`` is a valid value.
    """

    name: str
    type: str
    lo: float | None = None
    hi: float | None = None
    start: Any = None
    optional: bool = False
    help: str = ""


def param(type: str, default: Any = dataclasses.MISSING, *, lo: float | None = None,
          hi: float | None = None, start: Any = None, help: str = "") -> Any:
    """A dataclass field that is also an intervention parameter (see :class:`Param`)."""
    if start is None and default is not dataclasses.MISSING:
        start = default
    meta = {"param": dict(type=type, lo=lo, hi=hi, start=start,
                          optional=default is None, help=help)}
    if default is dataclasses.MISSING:
        return dataclasses.field(metadata=meta)
    return dataclasses.field(default=default, metadata=meta)


def py_literal(v: Any) -> str:
    """``v`` as Python source; infinities and NaN as ``float('inf')`` etc., tensors as ``torch.tensor``."""
    if isinstance(v, float) and not math.isfinite(v):
        return f"float({str(v)!r})"
    if isinstance(v, torch.Tensor):
        return f"torch.tensor({v.tolist()!r}, dtype={v.dtype})"
    if isinstance(v, (tuple, list)):
        inner = ", ".join(py_literal(x) for x in v)
        return f"({inner},)" if isinstance(v, tuple) and len(v) == 1 else (
            f"({inner})" if isinstance(v, tuple) else f"[{inner}]")
    return repr(v)


def short_value(v: Any) -> str:
    """A parameter value as a description shows it (``0.5``, ``3,7``, ``tensor(2, 4)``)."""
    if isinstance(v, float):
        return f"{v:g}"
    if isinstance(v, tuple):
        return ",".join(map(str, v))
    if isinstance(v, torch.Tensor):
        return f"tensor{tuple(v.shape)}"
    if isinstance(v, str):
        return v if len(v) <= 24 else v[:21] + "..."
    return str(v)


def jsonable(v: Any) -> Any:
    """A parameter value as a session file stores it (tuples as lists, tensors as literals)."""
    if isinstance(v, tuple):
        return list(v)
    if isinstance(v, torch.Tensor):
        return {"tensor": v.tolist(), "dtype": str(v.dtype).removeprefix("torch.")}
    if isinstance(v, float) and not math.isfinite(v):
        return str(v)  # "inf", "-inf", "nan": JSON has no infinities
    return v


def value_from_text(kind: str, usage: str, p: Param, text: str) -> Any:
    """A parameter's value from the command line's text (``usage``: how to write the kind)."""
    try:
        if p.type in ("float",):
            return float(text)
        if p.type in ("int", "dim"):
            return int(text)
        if p.type == "units":
            return tuple(int(u) for u in text.split(",") if u.strip())
        return text
    except ValueError:
        raise PlanError(f"{kind}: {p.name.upper()} must be {type_words(p)}, got {text!r}; "
                        f"write {usage}") from None


def type_words(p: Param) -> str:
    """What a parameter's values are, in words for a message."""
    return {"float": "a number", "int": "an integer", "dim": "an integer axis",
            "units": "integers separated by commas (3,7)", "input": "an input spec"}[p.type]


def convert_value(kind: str, p: Param, v: Any) -> Any:
    """A value from JSON/text/Python to the parameter's type."""
    if v is None:
        return None
    try:
        if p.type == "float":
            return float(v)
        if p.type in ("int", "dim"):
            if isinstance(v, float) and not v.is_integer():
                raise ValueError
            return int(v)
        if p.type == "units":
            if isinstance(v, str):  # typed in an editor: "3, 7"
                v = [u for u in v.split(",") if u.strip()]
            items = [v] if isinstance(v, int) else list(v)
            return tuple(int(u) for u in items)
        if p.type == "input" and isinstance(v, dict) and "tensor" in v:
            dtype = getattr(torch, str(v.get("dtype", "float32")), None)
            if not isinstance(dtype, torch.dtype):
                raise ValueError(f"no torch dtype {v.get('dtype')!r}")
            return torch.tensor(v["tensor"], dtype=dtype)
        return v
    except (TypeError, ValueError, OverflowError, RuntimeError, RecursionError) as exc:
        raise PlanError(f"{kind}: {p.name} must be {type_words(p)}, got {v!r}") from exc


def check_number(kind: str, name: str, v: Any, lo: float | None = None,
                 allow_nan: bool = False) -> None:
    """Refuse a parameter that is not a number (or NaN, unless allowed) or is below ``lo``."""
    if not isinstance(v, (int, float)) or isinstance(v, bool) or (math.isnan(float(v)) and not allow_nan):
        raise PlanError(f"{kind}: {name}={v!r} is not a number; give a float such as 0.5")
    if lo is not None and v < lo:
        raise PlanError(f"{kind}: {name}={v!r} must be >= {lo:g}")


def input_key(src: Any) -> Any:
    """A source input's identity: a tensor by dtype, shape and a digest of its bytes, a spec by
    its text (a tensor cannot be compared with ``==`` or hashed by value)."""
    if src is None:
        return None
    if isinstance(src, torch.Tensor):
        data = src.detach().cpu().contiguous()
        # reshape: a 0-d tensor (a scalar) has no byte view of its own
        digest = hashlib.sha1(data.reshape(-1).view(torch.uint8).numpy().tobytes()
                              if data.numel() else b"")
        return ("tensor", str(data.dtype), tuple(data.shape), digest.hexdigest())
    return ("spec", typed_text(str(src)))  # "text:a " and "text:a" are different inputs
