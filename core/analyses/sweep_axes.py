"""The axes and templates of a sweep: what each axis runs over, and the plan of one cell.

An axis is a name and a sequence of values: a layer pattern (``blocks.*``, matched with
the plan's path patterns), ``all`` token positions of the input, an integer range
``A:B[:STEP]``, a comma list, ``linspace(A,B,N)`` / ``logspace(A,B,N)``, or any list
or range in Python. Sequences stay lazy (``range``, :class:`Spaced`), so a grid's
size is known, and refused above the limit, before anything is built.

A template names axes in braces: ``{layer}``, ``patch@pos={pos}``. Only ``{NAME}`` of an
axis is replaced (no format specs, no attribute access), and a name that is no axis is
refused, so a template cannot reach anything but the cell's coordinates.
"""

from __future__ import annotations

import inspect
import math
import sys
import re
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

import numpy as np
import torch
from torch import nn

from ..base.errors import PlanError
from ..plan.intervention_base import Intervention
from ..plan.intervention_registry import parse_intervention
from ..plan.path_patterns import expand_paths, is_pattern

#: The most cells a sweep runs unless the caller raises it.
DEFAULT_MAX_CELLS = 10_000
LAYER_AXES = ("layer", "layers", "path")
POSITION_AXES = ("pos", "position", "positions")
_PLACEHOLDER = re.compile(r"\{([^{}]*)\}")
_SPACED = re.compile(r"^\s*(lin|log)space\(([^,()]+),([^,()]+),([^,()]+)\)\s*$")
_RANGE = re.compile(r"^\s*(-?\d+):(-?\d+)(?::(-?\d+))?\s*$")


#: the largest exponent whose power of ten is a finite float (and its negative, the
#: smallest that is not rounded to 0 as a normal float)
MAX_LOG10 = math.floor(math.log10(sys.float_info.max))


@dataclass(frozen=True)
class Spaced(Sequence):
    """``N`` numbers from ``a`` to ``b``, evenly (``log``: ``10**a`` .. ``10**b``), built on
    first read."""

    a: float
    b: float
    n: int
    log: bool = False

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i):  # type: ignore[override]
        return self.values()[i]

    def values(self) -> list[float]:
        f = np.logspace if self.log else np.linspace
        return [float(v) for v in f(self.a, self.b, self.n)]


def _number(text: str) -> int | float | str:
    t = text.strip()
    try:
        return int(t)
    except ValueError:
        pass
    try:
        return float(t)
    except ValueError:
        return t


def positions_of(inputs: Any) -> int:
    """How many token positions ``inputs`` has (token ids: the last axis)."""
    x = inputs
    if isinstance(x, dict):
        x = x.get("input_ids", next(iter(x.values()), None))
    if isinstance(x, (tuple, list)) and x:
        x = x[0]
    if isinstance(x, torch.Tensor) and x.dim() >= 1 and not x.is_floating_point():
        return int(x.shape[-1])
    raise PlanError("pos=all needs token ids as the input (a text: prompt); for other inputs "
                    "give the positions as a range, e.g. pos=0:8")


def axis_values(name: str, value: Any, module: nn.Module, inputs: Any) -> Sequence:
    """The values of axis ``name`` as given (see the module docstring); lazy where it can be."""
    if not isinstance(name, str) or not name.isidentifier():
        raise PlanError(f"sweep axis name {name!r}: use a plain name such as layer, pos, alpha")
    if isinstance(value, str):
        text = value.strip()
        if not text:
            raise PlanError(f"sweep axis {name!r} is empty: give values, a range A:B or a pattern")
        if text == "all":
            if name not in POSITION_AXES:
                raise PlanError(f"sweep axis {name}=all: 'all' means every token position "
                                f"(an axis named pos); for {name} give a range, e.g. 0:8")
            return range(positions_of(inputs))
        m = _SPACED.match(text)
        if m:
            try:
                a, b, n = float(m.group(2)), float(m.group(3)), int(m.group(4))
            except ValueError:
                raise PlanError(f"sweep axis {name}={text}: write linspace(A,B,N) with numbers "
                                "A, B and a whole count N") from None
            if n < 1 or not (math.isfinite(a) and math.isfinite(b)):
                raise PlanError(f"sweep axis {name}={text}: N must be at least 1 and A, B finite")
            if m.group(1) == "log" and max(abs(a), abs(b)) > MAX_LOG10:
                raise PlanError(f"sweep axis {name}={text}: 10**{max(a, b, key=abs):g} is beyond "
                                f"what a float holds (10**±{MAX_LOG10:.0f}); give exponents "
                                f"A, B within ±{MAX_LOG10:.0f}")
            return Spaced(a, b, n, m.group(1) == "log")
        m = _RANGE.match(text)
        if m and name not in LAYER_AXES:
            step = int(m.group(3) or 1)
            if step == 0:
                raise PlanError(f"sweep axis {name}={text}: the step cannot be 0")
            return range(int(m.group(1)), int(m.group(2)), step)
        if name in LAYER_AXES or is_pattern(text):
            return [p for piece in text.split(",") if piece.strip()
                    for p in expand_paths(piece.strip(), module)]
        return [_number(t) for t in text.split(",") if t.strip()]
    if isinstance(value, (range, Spaced)):
        return value
    if isinstance(value, np.ndarray):
        return [v.item() for v in value.reshape(-1)]
    if isinstance(value, (list, tuple)):
        return list(value)
    if isinstance(value, (int, float)):
        return [value]
    raise PlanError(f"sweep axis {name!r}: give a list, a range or a pattern, not {value!r}")


def check_size(axes: Mapping[str, Sequence], max_cells: int) -> int:
    """The number of cells; refuses an empty axis or more than ``max_cells`` cells."""
    for name, vals in axes.items():
        if axis_count(vals) == 0:
            raise PlanError(f"sweep axis {name!r} has no values: it would run nothing")
    n = math.prod(axis_count(v) for v in axes.values())
    if n > max_cells:
        raise PlanError(f"the sweep has {n:,} cells, over the limit of {max_cells:,}: narrow an "
                        "axis, or raise the limit (max_cells=, --max-cells N)")
    return n


def axis_count(vals: Sequence) -> int:
    """``len(vals)``, also past what ``len`` can return (``linspace(0,1,10**22)``, a range
    ``0:10**22``): such a count is refused by the cell limit, not by an OverflowError."""
    if isinstance(vals, Spaced):
        return vals.n
    if isinstance(vals, range):
        return max(0, (vals.stop - vals.start + vals.step - (1 if vals.step > 0 else -1))
                   // vals.step)
    return len(vals)


def fill(template: str, coords: Mapping[str, Any], what: str) -> str:
    """``template`` with each ``{NAME}`` replaced by that axis's value in this cell."""

    def one(m: re.Match) -> str:
        key = m.group(1)
        if key not in coords:
            raise PlanError(f"{what} {template!r}: {{{key}}} names no sweep axis; the axes are "
                            f"{', '.join(coords) or 'none'}")
        v = coords[key]
        return repr(v) if isinstance(v, float) else str(v)

    return _PLACEHOLDER.sub(one, template)


def placeholders(template: str) -> set[str]:
    return set(_PLACEHOLDER.findall(template))


def make_intervention(template: Any, coords: Mapping[str, Any], path: str,
                      parse: Callable[[str], Intervention] = parse_intervention) -> Intervention:
    """One cell's intervention from its template: a CLI string (filled, then parsed), an
    :class:`Intervention` (the same in every cell) or a callable given the coordinates it
    names as keyword arguments."""
    if isinstance(template, Intervention):
        return template
    if isinstance(template, str):
        text = fill(template, coords, f"intervention template for {path!r}")
        try:
            return parse(text)
        except PlanError as exc:
            raise PlanError(f"intervention template {template!r} at {path!r} gives {text!r}: "
                            f"{exc}") from None
    if callable(template):
        params: Mapping[str, inspect.Parameter]
        try:
            params = inspect.signature(template).parameters
        except (TypeError, ValueError):
            params = {}
        takes_all = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
        args = dict(coords) if takes_all else {k: v for k, v in coords.items() if k in params}
        iv = template(**args)
        if not isinstance(iv, Intervention):
            raise PlanError(f"the intervention template for {path!r} returned {iv!r}, not an "
                            "Intervention")
        return iv
    raise PlanError(f"intervention template for {path!r}: give a string such as "
                    f"'patch@pos={{pos}}', an Intervention or a function, not {template!r}")


def used_axes(intervene: Mapping[Any, Any]) -> set[str]:
    """The axes the templates name (a callable's parameters count as named)."""
    used: set[str] = set()
    for path, tpl in intervene.items():
        if isinstance(path, str):
            used |= placeholders(path)
        if isinstance(tpl, str):
            used |= placeholders(tpl)
        elif callable(tpl) and not isinstance(tpl, Intervention):
            try:
                params = inspect.signature(tpl).parameters
            except (TypeError, ValueError):
                continue
            if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
                return {"*"}
            used |= set(params)
    return used
