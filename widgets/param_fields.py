"""Reading and showing one intervention parameter in its field, for every editor of them.

A parameter is edited in a spin box (``"float"``, ``"int"``), a check box (``"bool"``) or
a line of text (anything else, parsed by the kind's ``from_values``). The cell editor
and the Intervention panel build their own fields but read and fill them here.
"""

from __future__ import annotations

import math
from typing import Any

from PySide6.QtWidgets import QWidget

from hookscope.core.base import typed_text


def read_param(how: str, w: QWidget, given: tuple[Any, Any] = (None, None)) -> Any:
    """The value in field ``w``. ``given``: (the text shown, the value it showed): text
    left as shown keeps that value (a vector, a tensor input), which text alone could not
    rebuild. Text is read as typed (:func:`typed_text`): a ``text:`` prompt's trailing
    spaces are tokens."""
    if how == "float":
        return w.value()  # type: ignore[attr-defined]
    if how == "int":
        return int(w.value())  # type: ignore[attr-defined]
    if how == "bool":
        return w.isChecked()  # type: ignore[attr-defined]
    text = typed_text(w.text())  # type: ignore[attr-defined]  # a prompt keeps its spaces
    shown, value = given
    return value if shown is not None and text == shown else (text or None)


def show_param(how: str, w: QWidget, v: Any) -> None:
    """Put ``v`` in field ``w`` without emitting its change signals."""
    w.blockSignals(True)
    if how == "float":
        f = float(v) if v is not None else 0.0
        w.setValue(max(-1e9, min(1e9, f)) if not math.isnan(f) else 0.0)  # type: ignore[attr-defined]
    elif how == "int":
        w.setValue(int(v or 0))  # type: ignore[attr-defined]
    elif how == "bool":
        w.setChecked(bool(v))  # type: ignore[attr-defined]
    else:
        text = "" if v is None else (", ".join(map(str, v)) if isinstance(v, (tuple, list)) else str(v))
        w.setText(text)  # type: ignore[attr-defined]
    w.blockSignals(False)
