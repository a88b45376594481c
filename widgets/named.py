"""``named(widget, name)``: a widget with its object name set in one expression (scripts
and tests find widgets by name; the Qt stubs do not accept ``objectName=`` keywords)."""

from __future__ import annotations

from typing import TypeVar

from PySide6.QtWidgets import QWidget

_W = TypeVar("_W", bound=QWidget)


def named(widget: _W, name: str) -> _W:
    """``widget`` with its object name set."""
    widget.setObjectName(name)
    return widget
