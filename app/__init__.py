"""The Hookscope application: main window, wiring, worker thread, CLI.

``create_window`` is imported lazily so that ``hookscope run`` (headless)
never loads Qt.
"""

from typing import Any

__all__ = ["create_window"]


def __getattr__(name: str) -> Any:
    if name == "create_window":
        from .launch import create_window

        return create_window
    raise AttributeError(name)
