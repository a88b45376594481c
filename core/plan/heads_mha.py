"""Heads of an ``nn.MultiheadAttention``: its output computed again with the heads apart.

``nn.MultiheadAttention`` multiplies by ``out_proj.weight`` inside
``F.multi_head_attention_forward`` without calling ``out_proj``, so no hook sees
the heads side by side. A forward hook (with the call's keyword arguments) on
the module computes them again: the same function with an identity output
projection gives the heads' outputs, (seq, batch, heads * head_dim) (batch first
when the module is), exactly (a product by 1 plus zeros); the intervention
changes the picked heads there, and ``out_proj``'s weight and bias give the
layer's output. The attention weights, when returned, are the module's own.

Computed again in the slow path: a run with heads picked on such a module may
differ from the module's own fast path (``torch._native_multi_head_attention``)
by float rounding on the heads left alone. Dropout in training mode draws anew.
"""

from __future__ import annotations

import inspect
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from ..plan.intervention_base import Intervention, InterventionContext

_SIGNATURE = inspect.signature(nn.MultiheadAttention.forward)


def mha_heads(module: nn.MultiheadAttention, args: Any, kwargs: dict) -> torch.Tensor:
    """The heads' outputs side by side for this call (before the output projection)."""
    bound = _SIGNATURE.bind(module, *args, **kwargs)
    bound.apply_defaults()
    a = bound.arguments
    q, k, v = a["query"], a["key"], a["value"]
    swap = module.batch_first and q.dim() == 3
    if swap:
        q, k, v = (x.transpose(1, 0) for x in (q, k, v))
    e = module.embed_dim
    extra: dict[str, Any] = {}
    if not module._qkv_same_embed_dim:
        extra = dict(use_separate_proj_weight=True, q_proj_weight=module.q_proj_weight,
                     k_proj_weight=module.k_proj_weight, v_proj_weight=module.v_proj_weight)
    heads, _ = F.multi_head_attention_forward(
        q, k, v, e, module.num_heads, module.in_proj_weight, module.in_proj_bias,
        module.bias_k, module.bias_v, module.add_zero_attn, module.dropout,
        torch.eye(e, dtype=q.dtype, device=q.device), None, training=module.training,
        key_padding_mask=a["key_padding_mask"], need_weights=False, attn_mask=a["attn_mask"],
        is_causal=a["is_causal"], **extra)
    return heads.transpose(1, 0) if swap else heads


def mha_output(module: nn.MultiheadAttention, heads: torch.Tensor, output: Any) -> Any:
    """The module's output from (changed) heads: ``out_proj`` applied, weights kept."""
    out = F.linear(heads, module.out_proj.weight, module.out_proj.bias)
    return (out, *output[1:]) if isinstance(output, tuple) else out


class MhaHeadHook:
    """A forward hook (``with_kwargs=True``) applying one layer's intervention to its heads."""

    __slots__ = ("path", "intervention", "n_heads", "sources", "calls", "tally")

    def __init__(self, path: str, intervention: Intervention, n_heads: int,
                 sources: list[Any] | None, tally: Any = None) -> None:
        self.path, self.intervention, self.n_heads = path, intervention, n_heads
        self.sources = sources
        self.calls = 0
        self.tally = tally  # the layer's receipt counts (core/engine/receipts.py)

    def __call__(self, module: nn.Module, args: Any, kwargs: dict, output: Any) -> Any:
        call = self.calls
        self.calls += 1
        assert isinstance(module, nn.MultiheadAttention)
        src = self.sources[call] if self.sources is not None and call < len(self.sources) else None
        ctx = InterventionContext(self.path, call, module, src, n_heads=self.n_heads)
        heads = mha_heads(module, args, kwargs)
        new = self.intervention.apply(heads, ctx)
        if self.tally is not None:
            self.tally.add(heads, new)
        return mha_output(module, new, output)


class MhaHeadsRecorder:
    """A forward hook (``with_kwargs=True``) keeping the heads of every call (a source run)."""

    __slots__ = ("outputs",)

    def __init__(self) -> None:
        self.outputs: list[Any] = []

    def __call__(self, module: nn.Module, args: Any, kwargs: dict, output: Any) -> None:
        assert isinstance(module, nn.MultiheadAttention)
        with torch.no_grad():
            self.outputs.append(mha_heads(module, args, kwargs).detach().clone())
