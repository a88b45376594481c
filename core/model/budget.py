"""The input memory budget: how large an input Hookscope builds before it refuses.

A typo such as ``random:100000x100000`` (40 GB), an ``.npy`` whose header
claims 37 GiB or a 20000 x 20000 image would otherwise exhaust memory (or
be killed by the OS) with no explanation. Every input loader asks
:func:`check_input_size` *before* allocating, and refuses with the size and
the limit in one line.

The budget is 4 GiB by default. Raise or lower it with the environment
variable ``HOOKSCOPE_MAX_INPUT_BYTES`` (bytes, or a size such as ``16G``),
the CLI's ``--max-input-bytes``, or :func:`set_max_input_bytes` from a script.
"""

from __future__ import annotations

import os
import re
from fractions import Fraction

from ..base.errors import HookscopeError, InputError
from ..base.user_text import shown

DEFAULT_MAX_INPUT_BYTES = 4 << 30
ENV_VAR = "HOOKSCOPE_MAX_INPUT_BYTES"
_override: int | None = None
_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
#: The largest size any option takes (1 EiB): past it a number is a typo, not a machine.
MAX_SIZE = 1 << 60


def scaled_size(number: str, unit: int, what: str,
                error: type[HookscopeError] = InputError) -> int:
    """``number`` (ASCII digits, maybe a decimal point) times ``unit``, exactly, as bytes;
    ``error`` when it passes :data:`MAX_SIZE` (no float overflow, no 4,300-digit limit)."""
    digits = number.lstrip("0") or "0"
    value = None if len(digits) > 30 else Fraction(number) * unit
    if value is None or value > MAX_SIZE:
        raise error(f"{what} is more than {human(MAX_SIZE)}, larger than any machine's "
                    "memory: write a size such as 8G")
    return int(value)


def parse_size(text: str) -> int:
    """``'4G'`` -> 4294967296; ``'1500'`` -> 1500 (units K, M, G, T, powers of 1024)."""
    # ASCII digits only: int() would read '٣' as 3, and a superscript '²' not at all
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([KMGT]?)(?:i?B)?\s*", str(text),
                     re.IGNORECASE | re.ASCII)
    if not m:
        raise InputError(f"memory budget {shown(str(text), 40)} is not a size: write bytes or a "
                         "number with K, M, G or T, e.g. 8G")
    return scaled_size(m.group(1), _UNITS[m.group(2).upper()],
                       f"memory budget {shown(str(text), 40)}")


def set_max_input_bytes(limit: int | str | None) -> None:
    """Set the budget for this process (``None``: back to the environment or the default)."""
    global _override
    _override = None if limit is None else (parse_size(limit) if isinstance(limit, str) else int(limit))


def max_input_bytes() -> int:
    if _override is not None:
        return _override
    env = os.environ.get(ENV_VAR, "").strip()
    if not env:
        return DEFAULT_MAX_INPUT_BYTES
    try:
        return parse_size(env)
    except InputError as exc:
        raise InputError(f"{ENV_VAR}: {exc}") from exc


def human(n: float) -> str:
    if n >= 1 << 80:  # a size from a typo: float() of it may overflow
        return "more than 1 YiB"
    n = float(n)
    for unit in ("bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB", "ZiB"):
        if n < 1024 or unit == "ZiB":
            return f"{n:.0f} {unit}" if unit == "bytes" else f"{n:.1f} {unit}"
        n /= 1024
    raise AssertionError("unreachable")  # pragma: no cover


def check_input_size(nbytes: int, what: str) -> None:
    """Raise :class:`InputError` when ``what`` would take more than the budget."""
    limit = max_input_bytes()
    if nbytes > limit:
        raise InputError(f"{what} would take {human(nbytes)}, above the input memory budget of "
                         f"{human(limit)}: use a smaller input, or raise the budget with "
                         f"--max-input-bytes or {ENV_VAR}")
