"""Other activation tools, run on the same models in the same run where installed.

* TorchLens 2.x: ``torchlens.trace(model, x)`` (saves every tensor operation's
  output by default; the pre-2.0 ``log_forward_pass`` is gone).
* nnsight: ``NNsight(model).trace(x)`` saving every leaf module's output.
* TransformerLens: a GPT-2-small-config model (no download; TransformerLens 4's
  ``TransformerBridge`` booted from a saved Hugging Face GPT-2, or 3.x's
  ``HookedTransformer``: :mod:`bench.tl_peer`), ``run_with_cache`` against its own
  plain forward; on the GPT-2 shapes only.

They come with the ``bench`` extra (``pip install -e '.[bench]'``; none of
them pulls torchvision). Neither is a dependency of Hookscope; when one does
not import, the report says so and moves on.
"""

from __future__ import annotations

import copy
import importlib
from typing import Any, Callable

import torch

from hookscope.core.base.call_args import call_model

from .cases import Case, reference, stale_verdict
from .models import BenchModel, leaf_paths

PEERS = {"torchlens": "torchlens", "nnsight": "nnsight", "transformer_lens": "transformer_lens"}


def available() -> dict[str, str]:
    """``{name: version or why not}`` for each competitor."""
    out = {}
    for name, mod_name in PEERS.items():
        try:
            mod = importlib.import_module(mod_name)
            version = getattr(mod, "__version__", None)
            if version is None:
                from importlib.metadata import version as dist_version

                version = dist_version(name.replace("_", "-"))
            out[name] = version
        except Exception as exc:  # ImportError, or a broken install
            out[name] = f"not installed ({type(exc).__name__})"
    return out


def is_installed(status: str) -> bool:
    return not status.startswith("not installed")


def _torchlens_case(bm: BenchModel, version: str) -> Case:
    import torchlens as tl

    module, x = copy.deepcopy(bm.module), bm.inputs  # its own copy, as nnsight's (below)

    def fn() -> Any:
        with torch.no_grad():
            return tl.trace(module, x)
    return Case("torchlens", f"TorchLens {version}, trace (every op saved)", fn, memory=True,
                note="torchlens.trace: every tensor op, not only leaves")


def _envoy(root: Any, path: str) -> Any:
    """The nnsight envoy of a dotted module path (numeric parts index containers)."""
    node = root
    for part in path.split("."):
        node = node[int(part)] if part.isdigit() else getattr(node, part)
    return node


def first_call_order(bm: BenchModel) -> list[str]:
    """The leaf modules in the order of their first call in one forward; leaves the
    forward never calls as modules (``out_proj`` of ``nn.MultiheadAttention``) are left out."""
    mods = dict(bm.module.named_modules())
    order: list[str] = []

    def seen(path: str) -> Callable[..., None]:
        def hook(*_: Any) -> None:
            if path not in order:
                order.append(path)
        return hook
    handles = [mods[p].register_forward_hook(seen(p)) for p in leaf_paths(bm.module)]
    try:
        with torch.inference_mode():
            call_model(bm.module, bm.inputs)
    finally:
        for h in handles:
            h.remove()
    return order


def _nnsight_case(bm: BenchModel, version: str) -> Case:
    from nnsight import NNsight

    # On its own copy: NNsight(model) replaces every module's forward with its own
    # (an instance attribute that stays), which would change the model every other
    # case runs on (Hookscope, rightly, copies rather than remakes a layer whose
    # forward is not torch's own: core/fast/victim_remake.py).
    wrapped = NNsight(copy.deepcopy(bm.module))
    # nnsight interleaves the requests with the forward, so they must come in the order the
    # modules first run (a ResNet block's one ReLU runs after bn1 but is defined after bn3).
    paths = first_call_order(bm)
    skipped = len(leaf_paths(bm.module)) - len(paths)
    x = bm.inputs

    def fn() -> Any:
        saved = []
        with torch.no_grad(), wrapped.trace(x):
            for p in paths:
                saved.append(_envoy(wrapped, p).output.save())
        return saved
    note = "first call of each leaf module, in the order they first run"
    if skipped:
        note += f" ({skipped} never called as modules left out)"

    def check(saved: list) -> tuple[bool, str]:
        # nnsight saves references, not copies: a capture a later in-place op
        # overwrites (ResNet's bn outputs under ReLU(inplace=True)) holds the new values.
        ref = reference(bm, paths)
        got = {p: [getattr(s, "value", s)] for p, s in zip(paths, saved)}
        return stale_verdict(got, {p: ts[:1] for p, ts in ref.items()})
    return Case("nnsight", f"nnsight {version}, save every leaf", fn, memory=True, note=note,
                check=check)


def _transformer_lens_case(bm: BenchModel, version: str) -> Case | None:
    if not bm.name.startswith("gpt2"):
        return None
    from .tl_peer import tl_gpt2_config

    layers = len(bm.module.h)
    model = tl_gpt2_config(layers)
    x = bm.inputs

    def plain() -> Any:
        with torch.inference_mode():
            return model(x)

    def fn() -> Any:
        with torch.inference_mode():
            return model.run_with_cache(x)
    return Case("transformer_lens", f"TransformerLens {version}, run_with_cache", fn,
                plain=plain, memory=False,
                note=f"{type(model).__name__}, GPT-2-small config ({layers} layers); ratio against "
                     "its own plain forward")


BUILDERS = {"torchlens": _torchlens_case, "nnsight": _nnsight_case,
            "transformer_lens": _transformer_lens_case}


def competitor_cases(bm: BenchModel) -> tuple[list[Case], list[str]]:
    """Cases for the installed competitors on ``bm``, and a line for each one missing."""
    cases, missing = [], []
    for name, status in available().items():
        if not is_installed(status):
            missing.append(f"{name}: {status}; install the bench extra to compare")
            continue
        try:
            case = BUILDERS[name](bm, status)
        except Exception as exc:  # an API change must not sink the whole run
            missing.append(f"{name} {status}: could not set up ({type(exc).__name__}: {exc})")
            continue
        if case is not None:
            cases.append(case)
    return cases, missing
