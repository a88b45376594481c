"""Who may veto a file a widget is about to write.

A widget's own export (a plot's "Export as PNG…") knows nothing of the files the
application has read. The window that holds it does: it implements
:class:`GuardsOutputs`, and :func:`refuse_output` asks the nearest such ancestor
to refuse ``path`` (a :class:`~hookscope.core.HookscopeError`) before anything is
written. A widget used on its own has no such ancestor and writes as asked.
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol, runtime_checkable

from PySide6.QtWidgets import QWidget


@runtime_checkable
class GuardsOutputs(Protocol):
    """A window that knows which files must not be replaced."""

    def refuse_output(self, what: str, path: str | Path) -> None:
        """Raise a HookscopeError when writing ``path`` would replace a file it reads."""


def refuse_output(widget: QWidget, what: str, path: str | Path) -> None:
    """Let the nearest ancestor of ``widget`` that guards outputs refuse ``path``."""
    w: QWidget | None = widget
    while w is not None:
        if isinstance(w, GuardsOutputs):
            w.refuse_output(what, path)
            return
        w = w.parentWidget()
