"""Echoing what a person typed back to them, safely: one line, bounded, no terminal tricks.

A spec or input can hold a newline, an escape sequence, a NUL byte or five
thousand characters. Messages quote it with :func:`shown` (escaped and
shortened in the middle), the CLI passes its final line through
:func:`one_line`, and file checks use :func:`is_file`, which answers False
instead of raising for a name the OS cannot even look up (too long, NUL byte).
"""

from __future__ import annotations

import unicodedata
from pathlib import Path

_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def escape_controls(text: str) -> str:
    """Control and line-separator characters written as escapes; everything else kept."""
    out = []
    for ch in text:
        if ch in _ESCAPES:
            out.append(_ESCAPES[ch])
        elif unicodedata.category(ch) in ("Cc", "Cf", "Zl", "Zp", "Cs"):
            code = ord(ch)
            out.append(f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")
        else:
            out.append(ch)
    return "".join(out)


def typed_text(text: str) -> str:
    """A value a person typed (a field, an option, a session entry) as they meant it: the
    spaces before it removed, and those after it unless it holds a prompt. A ``text:``
    prompt is always the last thing in what holds it (``text:...``, ``patch:text:...``,
    ``diff:text:A|text:B``), and its trailing spaces are tokens."""
    t = text.lstrip()
    return t if "text:" in t else t.rstrip()


def shorten(text: str, limit: int = 160) -> str:
    """``text`` cut in the middle to about ``limit`` characters, saying how long it was."""
    if len(text) <= limit:
        return text
    half = max(limit // 2 - 10, 10)
    return f"{text[:half]}…({len(text)} characters)…{text[-half:]}"


def shown(text: object, limit: int = 160) -> str:
    """``text`` quoted for a message: escaped, shortened, in single quotes."""
    return "'" + shorten(escape_controls(str(text)), limit) + "'"


def safe_str(value: object) -> str:
    """``str(value)``, or a note saying it could not be made: a model's exception class may
    have a ``__str__`` that itself raises, and a message about it must still be shown."""
    try:
        return str(value)
    except Exception as exc:  # noqa: BLE001 - whatever the user's __str__ raises
        return (f"<a {type(value).__name__} whose message cannot be shown: its __str__ raised "
                f"{type(exc).__name__}>")


def one_line(message: str, limit: int = 2000) -> str:
    """A message as one terminal line of bounded length."""
    return shorten(escape_controls(str(message)), limit)


def is_file(path: Path | str) -> bool:
    """``Path.is_file`` that says False for names the OS refuses to look up."""
    try:
        return Path(path).is_file()
    except (OSError, ValueError):  # ENAMETOOLONG, embedded NUL byte
        return False


def is_dir(path: Path | str) -> bool:
    """``Path.is_dir`` that says False for names the OS refuses to look up."""
    try:
        return Path(path).is_dir()
    except (OSError, ValueError):
        return False


def user_path(text: str | Path) -> Path:
    """``Path(text).expanduser()``, or the path as written when ``~name`` names no user."""
    try:
        return Path(text).expanduser()
    except RuntimeError:  # "Could not determine home directory"
        return Path(text)


def spreadsheet_cell(label: str) -> str:
    """``label`` for a CSV cell: a spreadsheet reads text starting ``=``, ``+``, ``-``, ``@``
    as a formula, so such text (a number aside) gets a leading ``'``."""
    if label[:1] in ("=", "+", "-", "@", "\t", "\r"):
        try:
            float(label)
        except ValueError:
            return "'" + label
    return label


def is_digits(text: str) -> bool:
    """Whether ``text`` is one or more ASCII digits 0-9: ``str.isdigit`` also accepts "²"
    and other digits that ``int()`` refuses, so a check with it lets a traceback through."""
    return text.isascii() and text.isdigit()


def as_int(text: str) -> int | None:
    """``text`` (surrounding spaces aside) as an int when it is ASCII digits with an optional
    leading minus ("-3"), else ``None``."""
    t = text.strip()
    return int(t) if is_digits(t.removeprefix("-")) else None
