"""The Hookscope application: main window, wiring, worker thread, CLI.

``create_window`` and ``explore`` (the window on a model of this Python
session, :mod:`.notebook`) are imported lazily so that ``hookscope run``
(headless) never loads Qt.
"""

from typing import Any

__all__ = ["create_window", "explore"]


def __getattr__(name: str) -> Any:
    if name == "create_window":
        from .launch import create_window

        return create_window
    if name == "explore":
        from .notebook import explore

        return explore
    raise AttributeError(name)
