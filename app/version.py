"""``hookscope --version``: Hookscope's version and those of what it runs on.

The version is the installed distribution's (``importlib.metadata``, from
pyproject.toml), also ``hookscope.core.__version__``. There is no
``hookscope.__version__``: ``hookscope`` is a namespace over core/, widgets/, app/
and resources/ (setuptools' package-dir mapping), with no ``__init__`` of its own.
"""

from __future__ import annotations

import argparse
import platform
from importlib.metadata import version
from typing import Any

from .std_streams import data_stream


def _qt() -> str:
    try:
        import PySide6
        from PySide6 import QtCore
    except ImportError as exc:  # a broken Qt install: the rest still says what it is
        return f"Qt not loadable ({exc})"
    return f"Qt {QtCore.qVersion()} (PySide6 {PySide6.__version__})"


def version_text() -> str:
    """``hookscope 0.1.0 (torch 2.3.1, Qt 6.7.2 (PySide6 6.7.2), Python 3.11.9)``."""
    import torch

    return (f"hookscope {version('hookscope')} (torch {torch.__version__}, {_qt()}, "
            f"Python {platform.python_version()})")


class VersionAction(argparse.Action):
    """``--version``: print :func:`version_text` on stdout and exit 0 (Qt is asked for
    its version only when the flag is given)."""

    def __init__(self, option_strings: list[str], dest: str = argparse.SUPPRESS,
                 default: Any = argparse.SUPPRESS, help: str | None = None) -> None:
        super().__init__(option_strings, dest=dest, default=default, nargs=0,
                         help=help or "print Hookscope's version, torch's and Qt's, and exit")

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        out = data_stream()
        out.write(version_text() + "\n")
        out.flush()
        parser.exit()
