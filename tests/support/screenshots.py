"""Screenshots for a person to look at, not assertions: saved only when the environment
variable ``HOOKSCOPE_SCREENSHOTS`` names a folder (``HOOKSCOPE_SCREENSHOTS=/tmp/shots
pytest tests/app/...``), so a test run writes nothing outside its own temporary folders."""

from __future__ import annotations

import os
from pathlib import Path

ENV = "HOOKSCOPE_SCREENSHOTS"


def wanted() -> bool:
    """Whether screenshots are asked for."""
    return bool(os.environ.get(ENV))


def save_shot(widget, name: str) -> None:
    """``widget``'s picture as ``NAME.png`` in the folder ``HOOKSCOPE_SCREENSHOTS`` names
    (made if missing); nothing when it names none."""
    folder = os.environ.get(ENV)
    if not folder:
        return
    Path(folder).mkdir(parents=True, exist_ok=True)
    assert widget.grab().save(str(Path(folder) / f"{name}.png"))
