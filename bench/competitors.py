"""Other activation tools, run on the same models in the same run where installed.

TorchLens (``log_forward_pass(..., layers_to_save="all")``) and nnsight
(``NNsight(model).trace(x)`` saving every leaf module's output) come with the
``bench`` extra (``pip install -e '.[bench]'``). Neither is a dependency of
Hookscope; when one does not import, the report says so and moves on.
"""

from __future__ import annotations

import importlib
from typing import Any

import torch

from .cases import Case
from .models import BenchModel, leaf_paths


def available() -> dict[str, str]:
    """``{name: version or why not}`` for each competitor."""
    out = {}
    for name in ("torchlens", "nnsight"):
        try:
            mod = importlib.import_module(name)
            out[name] = getattr(mod, "__version__", "installed")
        except Exception as exc:  # ImportError, or a broken install
            out[name] = f"not installed ({type(exc).__name__})"
    return out


def is_installed(status: str) -> bool:
    return not status.startswith("not installed")


def _torchlens_case(bm: BenchModel, version: str) -> Case:
    import torchlens as tl

    module, x = bm.module, bm.inputs

    def fn() -> Any:
        with torch.no_grad():
            return tl.log_forward_pass(module, x, layers_to_save="all")
    return Case("torchlens", f"TorchLens {version}, log everything", fn, memory=True,
                note="every tensor op, not only leaves")


def _envoy(root: Any, path: str) -> Any:
    """The nnsight envoy of a dotted module path (numeric parts index containers)."""
    node = root
    for part in path.split("."):
        node = node[int(part)] if part.isdigit() else getattr(node, part)
    return node


def _nnsight_case(bm: BenchModel, version: str) -> Case:
    from nnsight import NNsight

    wrapped = NNsight(bm.module)
    paths = leaf_paths(bm.module)
    x = bm.inputs

    def fn() -> Any:
        saved = []
        with torch.no_grad(), wrapped.trace(x):
            for p in paths:  # in execution order: nnsight interleaves with the forward
                saved.append(_envoy(wrapped, p).output.save())
        return saved
    return Case("nnsight", f"nnsight {version}, save every leaf", fn, memory=True,
                note="first call of each leaf module")


def competitor_cases(bm: BenchModel) -> tuple[list[Case], list[str]]:
    """Cases for the installed competitors on ``bm``, and a line for each one missing."""
    cases, missing = [], []
    for name, status in available().items():
        if not is_installed(status):
            missing.append(f"{name}: {status}; install the bench extra to compare")
            continue
        try:
            cases.append((_torchlens_case if name == "torchlens" else _nnsight_case)(bm, status))
        except Exception as exc:  # an API change must not sink the whole run
            missing.append(f"{name} {status}: could not set up ({type(exc).__name__}: {exc})")
    return cases, missing
