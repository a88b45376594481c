"""Work-arounds for defects of particular Qt-for-Python releases.

PySide6 6.12.0 on Python 3.11 (excluded in pyproject.toml; this guards an
environment that has it anyway): many methods that return nothing
(``QTimer.start``, ``QWidget.show``, ``QCoreApplication.processEvents``, ...)
give back ``None`` without taking a reference to it, so every call lowers
``None``'s reference count by one. After a few thousand calls (a minute of
dragging a bound, one test session) the count reaches zero and CPython aborts
with "Fatal Python error: none_dealloc". Python 3.12+ is not affected (``None``
is immortal there, PEP 683) and PySide6 6.11.2 does not have the defect.

The real fix is a PySide6 release without the defect; until then
:func:`guard_none_refcount` gives ``None`` a reference count so large that
no session can run it down. ``None`` is never freed anyway, so the extra
count changes nothing else.
"""

from __future__ import annotations

import ctypes
import sys

_RESERVE = 1 << 48
_applied = False


def affected(pyside_version: str | None = None) -> bool:
    """True where the None-refcount defect can bite (PySide6 6.12.x on Python < 3.12)."""
    if sys.version_info >= (3, 12):
        return False
    if pyside_version is None:
        try:
            import PySide6
        except ImportError:
            return False
        pyside_version = PySide6.__version__
    return pyside_version.startswith("6.12.")


def guard_none_refcount() -> bool:
    """Apply the work-around once where needed; returns whether it is in force."""
    global _applied
    if _applied:
        return True
    if not affected():
        return False
    # ob_refcnt is the first field of every object on CPython < 3.12. Signal.emit()
    # under-counts True the same way (False too, by the same path), so all three.
    for singleton in (None, True, False):
        ctypes.c_ssize_t.from_address(id(singleton)).value += _RESERVE
    _applied = True
    return True
