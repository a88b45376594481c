"""Model sources behind a prefix (``hf:``, ``torchvision:``, ``timm:``): one dispatch.

Each adapter lives in its own file and imports its optional package only
when a spec asks for it, so Hookscope installs and starts without them.
"""

from __future__ import annotations

from typing import Any

ADAPTER_PREFIXES = ("hf:", "torchvision:", "timm:")


def load_adapter(spec: str) -> Any:
    """The :class:`~.sources.LoadedModel` for an adapter spec (see :data:`ADAPTER_PREFIXES`)."""
    if spec.startswith("hf:"):
        from .source_hf import load_hf

        return load_hf(spec)
    from .source_vision import load_timm, load_torchvision

    return load_torchvision(spec) if spec.startswith("torchvision:") else load_timm(spec)


def missing_package(spec: str, package: str, extra: str, exc: BaseException) -> str:
    """The message for an adapter whose package is absent or broken."""
    if isinstance(exc, ModuleNotFoundError):
        return (f"{spec} needs the {package} package, which is not installed: "
                f"pip install 'hookscope[{extra}]'")
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return (f"{spec} needs the {package} package, which is installed but fails to import "
            f"({type(exc).__name__}: {first}); reinstall a build that matches your torch")
