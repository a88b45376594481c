"""Named points of a transformer's residual stream: ``resid_pre.N`` and ``resid_post.N``.

For the families whose list of blocks is known (the lens's: Hugging Face GPT-2, the Llama
family, Pythia, BERT, ``demo:lm``), ``resid_pre.N`` is block N's first input (``BLOCK:input``,
a forward pre-hook) and ``resid_post.N`` its output. A plan resolves them to those places
(records and receipts carry the real path); patterns (``resid_pre.*``) expand over the
blocks. ``resid_mid.N`` (between attention and MLP) is not offered: no module carries it in
these families, and setting it would mean changing the attention output that is added into
it; to read it, capture the second norm's input (``transformer.h.N.ln_2:input`` on GPT-2,
``model.layers.N.post_attention_layernorm:input`` on Llama, ``blocks.N.ln2:input`` on
``demo:lm``; BERT's ``...attention`` output is it, after its norm).
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any, Iterable

from torch import nn

from ..base.errors import PlanError
from .plan import INPUT_SUFFIX

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


def blocks_of(paths: Iterable[str]) -> list[str]:
    """The block paths of the first known list that ``paths`` holds (``[]``: none)."""
    known = set(paths)
    for lst in BLOCK_LISTS:
        blocks: list[str] = []
        while f"{lst}.{len(blocks)}" in known:
            blocks.append(f"{lst}.{len(blocks)}")
        if blocks:
            return blocks
    return []


def residual_points(paths: Iterable[str]) -> dict[str, str]:
    """``{"resid_pre.0": "transformer.h.0:input", "resid_post.0": "transformer.h.0", ...}``
    for a model whose layer paths are ``paths`` (empty for a family not known)."""
    blocks = blocks_of(paths)
    out = {f"resid_pre.{i}": b + INPUT_SUFFIX for i, b in enumerate(blocks)}
    out.update({f"resid_post.{i}": b for i, b in enumerate(blocks)})
    return out


def residual_target(path: str, paths: Iterable[str]) -> str:
    """The real path a ``resid_*`` name stands for; a :class:`PlanError` saying why not."""
    m = _NAME.match(path)
    assert m is not None
    kind, n = m.groups()
    if kind == "mid":
        raise PlanError(f"{path!r}: resid_mid is carried by no module here (the block adds "
                        "the attention output inline); read it by capturing the block's second "
                        "norm's input, e.g. transformer.h.N.ln_2:input on GPT-2, "
                        "model.layers.N.post_attention_layernorm:input on Llama")
    points = residual_points(paths)
    if not points:
        raise PlanError(f"{path!r}: residual-stream names are known for GPT-2, the Llama "
                        "family, Pythia, BERT and demo:lm, whose blocks this model does not "
                        "have; aim at a block's output or BLOCK:input instead")
    if path not in points:
        last = len(points) // 2 - 1
        raise PlanError(f"{path!r}: this model's blocks are resid_{kind}.0 .. resid_{kind}.{last}"
                        if n.isdigit() else f"{path!r}: write resid_{kind}.N with a block number")
    return points[path]


def named_points_resolved(plan: Any, module: nn.Module) -> Any:
    """``plan`` with every ``resid_*`` name replaced by the real path it stands for (an
    exported script, which knows only module paths, names the places themselves)."""
    names = [p for p in plan.paths() if is_residual_name(p)]
    if not names:
        return plan
    paths = [p for p, _ in module.named_modules()]
    real = {p: residual_target(p, paths) for p in names}
    return dataclasses.replace(
        plan, capture=tuple(real.get(p, p) for p in plan.capture),
        interventions={real.get(p, p): iv for p, iv in plan.interventions.items()})


__all__ = ["BLOCK_LISTS", "named_points_resolved", "blocks_of", "is_residual_name", "residual_points", "residual_target"]
