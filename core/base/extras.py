"""Optional packages (accelerate, ray): imported only when a feature needs them.

A missing package is a mistake a person can fix, so it is a
:class:`MissingExtraError` that names the pip extra to install, never a bare
``ImportError`` from deep inside a run.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from .errors import HookscopeError


class MissingExtraError(HookscopeError):
    """An optional package a feature needs is not installed."""


def require(package: str, extra: str, feature: str) -> ModuleType:
    """Import ``package`` or raise :class:`MissingExtraError` saying how to install it.

    ``extra`` is the ``hookscope[EXTRA]`` that brings it; ``feature`` names what
    was asked for (``--device-map``, ``--ray``) so the message says why.
    """
    try:
        return importlib.import_module(package)
    except ImportError as exc:
        raise MissingExtraError(
            f"{feature} needs the '{package}' package, which is not installed here: "
            f"pip install 'hookscope[{extra}]' (or pip install {package})") from exc
