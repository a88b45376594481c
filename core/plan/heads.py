"""Where an attention module's heads can be acted on: the input of its output projection.

An attention layer's output is the output projection of the heads' outputs laid
side by side, (..., n_heads * head_dim); after the projection the heads are mixed
and cannot be told apart. So ``heads=`` acts at the projection's input, through a
forward PRE-hook on the projection (:class:`HeadSite`), reshaped to
(..., n_heads, head_dim). The number of heads comes from the module or its config.

Recognised: Hugging Face GPT-2 (``c_proj``), Llama-family and transformers 5 ViT
(``o_proj``), BERT-family and older ViT (``output.dense`` of the ``attention``
module), attention written with ``out_proj``/``proj`` and a heads count
(``demo:lm``), and a self-attention module whose own output is the heads side by
side (``BertSelfAttention``: acted on at its output). ``nn.MultiheadAttention`` is
refused: its forward multiplies by ``out_proj.weight`` inside
``F.multi_head_attention_forward`` without calling ``out_proj``, so no hook sees
the heads.
"""

from __future__ import annotations

from dataclasses import dataclass

from torch import nn

from ..base.errors import PlanError

#: Child paths of an output projection, most specific first.
PROJECTIONS = ("c_proj", "o_proj", "out_proj", "output.dense", "proj", "dense")
_COUNTS = ("num_heads", "num_attention_heads", "n_head", "n_heads")


@dataclass(frozen=True)
class HeadSite:
    """Where to act on ``module``'s heads: a pre-hook on ``projection`` (its child at
    ``name``), or, when ``projection`` is ``None``, the module's own output."""

    projection: nn.Module | None
    name: str
    n_heads: int
    #: An nn.MultiheadAttention: its output is computed again with the heads apart.
    recompute: bool = False


def _count(module: nn.Module) -> int | None:
    for holder in (module, getattr(module, "self", None), getattr(module, "attention", None),
                   getattr(module, "config", None)):
        if holder is None:
            continue
        for attr in _COUNTS:
            n = getattr(holder, attr, None)
            if isinstance(n, int) and not isinstance(n, bool) and n > 0:
                return n
    return None


def _child(module: nn.Module, dotted: str) -> nn.Module | None:
    m: nn.Module | None = module
    for part in dotted.split("."):
        m = getattr(m, part, None) if isinstance(m, nn.Module) else None
        if not isinstance(m, nn.Module):
            return None
    return m


def _in_features(m: nn.Module) -> int | None:
    if isinstance(m, nn.Linear):
        return m.in_features
    w = getattr(m, "weight", None)  # transformers' Conv1D: weight (in, out), nx
    nx = getattr(m, "nx", None)
    if isinstance(nx, int):
        return nx
    return int(w.shape[0]) if w is not None and getattr(w, "dim", lambda: 0)() == 2 else None


def head_site(module: nn.Module, path: str = "") -> HeadSite:
    """Where ``module``'s heads are acted on; a :class:`PlanError` that says why otherwise."""
    where = f"layer {path!r}" if path else "this layer"
    if isinstance(module, nn.MultiheadAttention):
        return HeadSite(None, "out_proj (computed again)", module.num_heads, recompute=True)
    n = _count(module)
    if n is None:
        raise PlanError(f"{where} ({type(module).__name__}) has no number of heads (num_heads, "
                        "num_attention_heads, n_head or its config's): heads can be picked on "
                        "attention modules only; pick the attention module, e.g. transformer.h.0.attn")
    for name in PROJECTIONS:
        proj = _child(module, name)
        if proj is None or isinstance(proj, nn.MultiheadAttention):
            continue
        width = _in_features(proj)
        if width is not None and width % n == 0:
            return HeadSite(proj, name, n)
    cls = type(module).__name__
    if cls.endswith("SelfAttention") and any(hasattr(module, a) for a in ("query", "q_proj")):
        return HeadSite(None, "", n)  # its output is the heads side by side (BertSelfAttention)
    raise PlanError(f"{where} ({cls}) has {n} heads but no output projection Hookscope knows "
                    f"({', '.join(PROJECTIONS)}) whose input splits into {n} heads, so its heads "
                    "cannot be told apart; pick its parent attention module or act on the whole output")
