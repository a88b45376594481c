"""Model sources behind a prefix (``hf:``, ``torchvision:``, ``timm:``): one dispatch.

Each adapter lives in its own file and imports its optional package only
when a spec asks for it, so Hookscope installs and starts without them.
"""

from __future__ import annotations

from typing import Any
from .source_hf import load_hf
from .source_vision import load_timm, load_torchvision

ADAPTER_PREFIXES = ("hf:", "torchvision:", "timm:")


def load_adapter(spec: str) -> Any:
    """The :class:`~.sources.LoadedModel` for an adapter spec (see :data:`ADAPTER_PREFIXES`)."""
    if spec.startswith("hf:"):
        return load_hf(spec)

    return load_torchvision(spec) if spec.startswith("torchvision:") else load_timm(spec)


