"""Named points of a transformer's residual stream: ``resid_pre.N``, ``resid_mid.N``,
``resid_post.N``.

For the families whose list of blocks is known (the lens's: Hugging Face GPT-2, the Llama
family, Pythia, BERT, ``demo:lm``), ``resid_pre.N`` is block N's first input (``BLOCK:input``,
a forward pre-hook) and ``resid_post.N`` its output. A plan resolves them to those places
(records and receipts carry the real path); patterns (``resid_pre.*``) expand over the
blocks.

``resid_mid.N``, between attention and MLP, is carried by no module in the pre-norm
families (GPT-2, Llama, ``demo:lm``: the block adds the attention output inline). It is
reached through the attention module's output: a pre-hook on the block keeps its input
(``resid_pre``), the attention's hook sees ``resid_mid = resid_pre + attention output``
(its first tensor), and what the intervention sets it to, minus that, is added to the
attention output, so the block's residual and its MLP both see the new value. In BERT
(post-norm) it is the ``attention`` module's output, after its norm. Pythia adds attention
and MLP in parallel, so it has none.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any, Iterable

from torch import nn

from ..base.errors import PlanError
from .input_suffix import INPUT_SUFFIX

#: The attention submodule of a block whose output is added into the residual stream
#: (pre-norm blocks), by the list holding the blocks.
MID_ATTENTION = {"transformer.h": "attn", "model.layers": "self_attn", "blocks": "attn"}
#: Post-norm blocks whose ``attention`` output is resid_mid itself.
MID_OUTPUT = {"bert.encoder.layer": "attention", "encoder.layer": "attention"}

#: The lists holding the blocks, in the order tried.
BLOCK_LISTS = ("transformer.h",         # GPT-2, GPT-J, GPT-Neo
               "model.layers",          # Llama, Mistral, Qwen, Gemma
               "gpt_neox.layers",       # Pythia
               "bert.encoder.layer",    # BERT (with a head)
               "encoder.layer",         # BERT (the bare model)
               "blocks")                # demo:lm
_NAME = re.compile(r"^resid_(pre|mid|post)\.(.+)$")


def is_residual_name(path: str) -> bool:
    return _NAME.match(path) is not None


def _list_of(paths: Iterable[str]) -> tuple[str, list[str]]:
    """The first known list of blocks that ``paths`` holds and its blocks (``("", [])``)."""
    known = set(paths)
    for lst in BLOCK_LISTS:
        blocks: list[str] = []
        while f"{lst}.{len(blocks)}" in known:
            blocks.append(f"{lst}.{len(blocks)}")
        if blocks:
            return lst, blocks
    return "", []


def blocks_of(paths: Iterable[str]) -> list[str]:
    """The block paths of the first known list that ``paths`` holds (``[]``: none)."""
    return _list_of(paths)[1]


def mid_points(paths: Iterable[str]) -> dict[str, tuple[str, str | None]]:
    """``{"resid_mid.N": (attention path, block path)}``: the block path is ``None`` where the
    attention's output is resid_mid itself (BERT); empty where no resid_mid is offered."""
    known = set(paths)
    lst, blocks = _list_of(known)
    if lst in MID_ATTENTION:
        return {f"resid_mid.{i}": (f"{b}.{MID_ATTENTION[lst]}", b) for i, b in enumerate(blocks)
                if f"{b}.{MID_ATTENTION[lst]}" in known}
    if lst in MID_OUTPUT:
        return {f"resid_mid.{i}": (f"{b}.{MID_OUTPUT[lst]}", None) for i, b in enumerate(blocks)
                if f"{b}.{MID_OUTPUT[lst]}" in known}
    return {}


def residual_points(paths: Iterable[str]) -> dict[str, str]:
    """``{"resid_pre.0": "transformer.h.0:input", "resid_post.0": "transformer.h.0",
    "resid_mid.0": "transformer.h.0.attn", ...}`` for a model whose layer paths are
    ``paths`` (empty for a family not known); a resid_mid maps to the attention module it
    is reached through (see :func:`mid_points`)."""
    paths = list(paths)
    blocks = blocks_of(paths)
    out = {f"resid_pre.{i}": b + INPUT_SUFFIX for i, b in enumerate(blocks)}
    out.update({name: attn for name, (attn, _) in mid_points(paths).items()})
    out.update({f"resid_post.{i}": b for i, b in enumerate(blocks)})
    return out


def residual_target(path: str, paths: Iterable[str]) -> str:
    """The real path a ``resid_*`` name stands for; a :class:`PlanError` saying why not."""
    m = _NAME.match(path)
    assert m is not None
    kind, n = m.groups()
    paths = list(paths)
    if kind == "mid" and blocks_of(paths) and not mid_points(paths):
        raise PlanError(f"{path!r}: this model's blocks add attention and MLP in parallel "
                        "(Pythia), so there is no residual stream between them; use "
                        "resid_pre or resid_post")
    points = residual_points(paths)
    if not points:
        raise PlanError(f"{path!r}: residual-stream names are known for GPT-2, the Llama "
                        "family, Pythia, BERT and demo:lm, whose blocks this model does not "
                        "have; aim at a block's output or BLOCK:input instead")
    if path not in points:
        last = len(blocks_of(paths)) - 1
        raise PlanError(f"{path!r}: this model's blocks are resid_{kind}.0 .. resid_{kind}.{last}"
                        if n.isdigit() else f"{path!r}: write resid_{kind}.N with a block number")
    return points[path]


def named_points_resolved(plan: Any, module: nn.Module) -> Any:
    """``plan`` with every ``resid_*`` name replaced by the real path it stands for (an
    exported script, which knows module paths, names the places themselves), but a
    ``resid_mid.N`` reached through the attention output, which keeps its name: the script
    hooks it as :func:`script_mid_sites` says."""
    names = [p for p in plan.paths() if is_residual_name(p)]
    if not names:
        return plan
    paths = [p for p, _ in module.named_modules()]
    through = script_mid_sites(plan, module)
    real = {p: residual_target(p, paths) for p in names if p not in through}
    return dataclasses.replace(
        plan, capture=tuple(real.get(p, p) for p in plan.capture),
        interventions={real.get(p, p): iv for p, iv in plan.interventions.items()})


def script_mid_sites(plan: Any, module: nn.Module) -> dict[str, tuple[str, str]]:
    """``{"resid_mid.N": (attention path, block path)}`` for the plan's ``resid_mid`` names
    reached through the attention output (not BERT's, which is a module's output): the
    exported script keeps the block's input with a pre-hook and adds what the intervention
    sets, minus ``resid_mid``, to the attention output, as the engine's ``MidHooks`` does."""
    names = [p for p in plan.paths() if is_residual_name(p)]
    if not any(p.startswith("resid_mid.") for p in names):
        return {}
    paths = [p for p, _ in module.named_modules()]
    for p in names:
        residual_target(p, paths)  # an unknown block or family: refused in words here
    mids = mid_points(paths)
    return {p: (mids[p][0], block) for p in names
            if p in mids and (block := mids[p][1]) is not None}


__all__ = ["BLOCK_LISTS", "mid_points", "named_points_resolved", "script_mid_sites", "blocks_of", "is_residual_name", "residual_points", "residual_target"]
