"""How each kind of attention module turns its input into attention probabilities.

Hugging Face's SDPA and flash attention never hand the probabilities out, so they
are computed again here from what the module was called with (its hidden states and
keyword arguments: the attention mask, the rotary ``position_embeddings``) and the
module's own projection weights: ``softmax(Q Kᵀ · scaling + mask)`` per head, as
transformers' eager attention computes it. Recognised:

- GPT-2 family (``c_attn`` split into query, key and value; ``scaling`` as the module has it);
- the Llama family (``q_proj``/``k_proj``, ``q_norm``/``k_norm`` where present (Qwen 3),
  the rotary embedding of the model's own ``apply_rotary_pos_emb``, grouped-query heads
  repeated, Gemma 2's score soft-capping);
- BERT family self-attention (``query``/``key``; a ``BertAttention`` is read through its
  ``self``), with its padding mask;
- ``demo:lm``'s own attention (``qkv``, ``n_head``, its causal ``mask`` buffer);
- ``nn.MultiheadAttention`` (``in_proj_weight`` or separate ``q/k_proj_weight``, ``bias_k``,
  ``add_zero_attn``, ``attn_mask``/``key_padding_mask``/``is_causal``).

The mask is read as the attention function of the model's implementation reads it:
a float mask is added, a boolean one keeps the ``True`` places; no mask means causal
for a causal module under SDPA/flash and nothing under eager (where transformers
always builds the mask). Probabilities are float32. Anything else is refused with a
:class:`PlanError` that says why. Pure torch, no Qt.
"""

from __future__ import annotations

import inspect
import math
import sys
from dataclasses import dataclass
from typing import Any, Callable

import torch
from torch import nn
from torch.nn import functional as F

from ..base.errors import PlanError

#: ``(module, its arguments by name) -> (query, key, scaling, mask, causal)``, query
#: ``(batch, heads, Tq, d)``, key ``(batch, heads, Tk, d)`` (grouped heads repeated).
QKValues = tuple[torch.Tensor, torch.Tensor, float, torch.Tensor | None, bool]
QK = Callable[[Any, dict[str, Any]], QKValues]


@dataclass(frozen=True)
class AttentionReader:
    """How one attention module's probabilities are recovered.

    ``module``: the module that computes the pattern (a ``BertAttention``'s ``self``);
    ``family``: its kind in words; ``heads``: query heads; ``reads``: its children whose
    outputs make the pattern (an intervention there would not be seen: refused).
    """

    module: nn.Module
    family: str
    heads: int
    reads: tuple[str, ...]
    qk: QK

    def probabilities(self, arguments: dict[str, Any]) -> torch.Tensor:
        """``(batch, heads, Tq, Tk)`` float32 probabilities of one call with ``arguments``."""
        with torch.inference_mode():
            q, k, scaling, mask, causal = self.qk(self.module, arguments)
            softcap = getattr(self.module, "attn_logit_softcapping", None)  # Gemma 2
            return pattern(q, k, scaling, mask, causal,
                           float(softcap) if isinstance(softcap, (int, float)) else None)


def pattern(q: torch.Tensor, k: torch.Tensor, scaling: float, mask: torch.Tensor | None,
            causal: bool, softcap: float | None = None) -> torch.Tensor:
    """``softmax(q kᵀ · scaling + mask)`` in float32 (a boolean mask keeps its ``True``
    places; the rest get float32's lowest value, as transformers' eager masks do);
    ``softcap``: scores first become ``softcap · tanh(scores / softcap)``."""
    scores = torch.matmul(q.float(), k.float().transpose(-1, -2)) * scaling
    if softcap is not None:
        scores = torch.tanh(scores / softcap) * softcap
    low = torch.finfo(scores.dtype).min
    if mask is not None:
        mask = mask.to(scores.device)
        if mask.dtype == torch.bool:
            scores = scores.masked_fill(~mask, low)
        else:
            scores = scores + mask.float()
    elif causal and q.shape[-2] > 1:
        tq, tk = q.shape[-2], k.shape[-2]
        allowed = torch.ones(tq, tk, dtype=torch.bool, device=scores.device).tril()
        scores = scores.masked_fill(~allowed, low)
    return torch.softmax(scores, dim=-1)


def arguments_of(module: nn.Module, args: tuple, kwargs: dict[str, Any]) -> dict[str, Any]:
    """A call's positional and keyword arguments by parameter name (extra keywords as given)."""
    try:
        bound = inspect.signature(module.forward).bind_partial(*args, **kwargs)
    except (TypeError, ValueError):
        return {**{f"#{i}": a for i, a in enumerate(args)}, **kwargs}
    out = dict(bound.arguments)
    for name, p in inspect.signature(module.forward).parameters.items():
        if p.kind is inspect.Parameter.VAR_KEYWORD and name in out:
            out.update(out.pop(name))
    return out


def _heads(x: torch.Tensor, head_dim: int) -> torch.Tensor:
    """``(..., T, n * head_dim)`` as ``(..., n, T, head_dim)``."""
    return x.view(*x.shape[:-1], -1, head_dim).transpose(-3, -2)


def _repeat(k: torch.Tensor, groups: int) -> torch.Tensor:
    """Grouped-query key heads repeated to one per query head (transformers' ``repeat_kv``)."""
    return k if groups == 1 else k.repeat_interleave(groups, dim=1)


def _implementation(module: nn.Module) -> str:
    impl = getattr(getattr(module, "config", None), "_attn_implementation", None)
    return impl if isinstance(impl, str) else "eager"


def _hf_mask(module: nn.Module, a: dict[str, Any]) -> tuple[torch.Tensor | None, bool]:
    """The mask as the module's attention function reads it, and whether no mask means causal."""
    mask = a.get("attention_mask")
    if mask is not None and not isinstance(mask, torch.Tensor):
        raise PlanError(f"the attention mask of {type(module).__name__} is a "
                        f"{type(mask).__name__} (flex attention?), which Hookscope cannot read; "
                        "load the model with attn_implementation='sdpa' or 'eager'")
    if _implementation(module) == "eager":
        return mask, False
    causal = a.get("is_causal")
    return mask, bool(getattr(module, "is_causal", True) if causal is None else causal)


def _hidden(module: nn.Module, a: dict[str, Any]) -> torch.Tensor:
    h = a.get("hidden_states")
    if not isinstance(h, torch.Tensor):
        raise PlanError(f"{type(module).__name__} was not called with hidden states")
    if a.get("encoder_hidden_states") is not None:
        raise PlanError(f"{type(module).__name__} was called as cross-attention (encoder hidden "
                        "states): only self-attention patterns are recovered")
    return h


def _gpt2(m: Any, a: dict[str, Any]) -> QKValues:
    h = _hidden(m, a)
    mask, causal = _hf_mask(m, a)
    q, k, _ = m.c_attn(h).split(m.split_size, dim=2)
    scaling = getattr(m, "scaling", None)
    if scaling is None:  # older transformers computed it in the attention function
        scaling = m.head_dim ** -0.5 if getattr(m, "scale_attn_weights", True) else 1.0
        if getattr(m, "scale_attn_by_inverse_layer_idx", False):
            scaling /= float(m.layer_idx + 1)
    return _heads(q, m.head_dim), _heads(k, m.head_dim), float(scaling), mask, causal


def _llama(m: Any, a: dict[str, Any]) -> QKValues:
    h = _hidden(m, a)
    d = m.head_dim
    q, k = _heads(m.q_proj(h), d), _heads(m.k_proj(h), d)
    if isinstance(getattr(m, "q_norm", None), nn.Module):  # Qwen3, Gemma 3
        q = m.q_norm(q.transpose(1, 2)).transpose(1, 2)
    if isinstance(getattr(m, "k_norm", None), nn.Module):
        k = m.k_norm(k.transpose(1, 2)).transpose(1, 2)
    rotary = a.get("position_embeddings")
    if rotary is None:
        raise PlanError(f"{type(m).__name__} was called without position_embeddings (cos, sin): "
                        "its rotary positions cannot be recovered (transformers 4.48 or newer "
                        "passes them)")
    apply = getattr(sys.modules.get(type(m).__module__), "apply_rotary_pos_emb", None)
    if apply is None:
        raise PlanError(f"{type(m).__module__} has no apply_rotary_pos_emb for the rotary positions")
    q, k = apply(q, k, *rotary)
    mask, causal = _hf_mask(m, a)
    k = _repeat(k, q.shape[1] // k.shape[1])
    return q, k, float(getattr(m, "scaling", d ** -0.5)), mask, causal


def _bert(m: Any, a: dict[str, Any]) -> QKValues:
    h = _hidden(m, a)
    d = m.attention_head_size
    if getattr(m, "position_embedding_type", "absolute") not in ("absolute", None):
        raise PlanError(f"{type(m).__name__} uses {m.position_embedding_type} position scores, "
                        "which Hookscope does not recompute")
    mask, causal = _hf_mask(m, a)
    return (_heads(m.query(h), d), _heads(m.key(h), d),
            float(getattr(m, "scaling", d ** -0.5)), mask, causal)


def _demo(m: Any, a: dict[str, Any]) -> QKValues:
    x = a.get("x", a.get("#0"))
    if not isinstance(x, torch.Tensor):
        raise PlanError(f"{type(m).__name__} was not called with a tensor")
    d = x.shape[-1]
    q, k, _ = m.qkv(x).split(d, dim=-1)
    hd = d // m.n_head
    t = x.shape[-2]
    return _heads(q, hd), _heads(k, hd), 1.0 / math.sqrt(hd), m.mask[:t, :t], False


def _mha(m: Any, a: dict[str, Any]) -> QKValues:
    query, key = a.get("query"), a.get("key")
    if not isinstance(query, torch.Tensor) or not isinstance(key, torch.Tensor):
        raise PlanError("nn.MultiheadAttention was not called with query and key tensors")
    batched = query.dim() == 3
    if not batched:
        query, key = query.unsqueeze(1), key.unsqueeze(1)
    elif m.batch_first:
        query, key = query.transpose(0, 1), key.transpose(0, 1)
    # (T, B, E) from here on, as F.multi_head_attention_forward
    e, n = m.embed_dim, m.num_heads
    d = e // n
    if m._qkv_same_embed_dim:
        w_q, w_k = m.in_proj_weight[:e], m.in_proj_weight[e:2 * e]
    else:
        w_q, w_k = m.q_proj_weight, m.k_proj_weight
    b = m.in_proj_bias
    q = F.linear(query, w_q, None if b is None else b[:e])
    k = F.linear(key, w_k, None if b is None else b[e:2 * e])
    bsz = q.shape[1]
    attn_mask = _mha_mask(a.get("attn_mask"), q.dtype)
    pad = _mha_mask(a.get("key_padding_mask"), q.dtype)
    if attn_mask is None and a.get("is_causal"):
        raise PlanError("nn.MultiheadAttention was called with is_causal=True and no attn_mask, "
                        "which torch refuses too")
    if m.bias_k is not None:
        k = torch.cat([k, m.bias_k.repeat(1, bsz, 1)])
        attn_mask = None if attn_mask is None else F.pad(attn_mask, (0, 1))
        pad = None if pad is None else F.pad(pad, (0, 1))
    q = q.view(q.shape[0], bsz * n, d).transpose(0, 1)   # (B*H, Tq, d)
    k = k.view(k.shape[0], bsz * n, d).transpose(0, 1)
    if m.add_zero_attn:
        k = torch.cat([k, k.new_zeros(bsz * n, 1, d)], dim=1)
        attn_mask = None if attn_mask is None else F.pad(attn_mask, (0, 1))
        pad = None if pad is None else F.pad(pad, (0, 1))
    tq, tk = q.shape[1], k.shape[1]
    mask = None
    if attn_mask is not None:
        mask = attn_mask.view(1, 1, tq, tk) if attn_mask.dim() == 2 else attn_mask.view(bsz, n, tq, tk)
    if pad is not None:
        pad = pad.view(bsz, 1, 1, tk)
        mask = pad if mask is None else mask + pad
    return (q.view(bsz, n, tq, d), k.view(bsz, n, tk, d), 1.0 / math.sqrt(d),
            None if mask is None else mask.expand(bsz, n, tq, tk), False)


def _mha_mask(mask: Any, dtype: torch.dtype) -> torch.Tensor | None:
    """A torch attention mask as an additive float one (``True`` = not allowed, ``-inf``
    there, as torch's ``F.multi_head_attention_forward`` reads it)."""
    if mask is None:
        return None
    if mask.dtype == torch.bool:
        return torch.zeros(mask.shape, dtype=torch.float32,
                           device=mask.device).masked_fill(mask, float("-inf"))
    return mask.float()


def _is_linear(m: Any) -> bool:
    return isinstance(m, nn.Module) and isinstance(getattr(m, "weight", None), torch.Tensor)


def _rows(m: Any, child: str) -> int:
    """The output width of ``m``'s projection ``child``."""
    return int(getattr(m, child).weight.shape[0])


def _reader(module: nn.Module) -> AttentionReader | None:
    """The reader of ``module`` itself, or ``None`` when it is not a kind recognised here."""
    if isinstance(module, nn.MultiheadAttention):
        return AttentionReader(module, "nn.MultiheadAttention", module.num_heads, (), _mha)
    m: Any = module  # attributes read by name below
    if _is_linear(getattr(m, "c_attn", None)) and hasattr(m, "split_size") and hasattr(m, "head_dim"):
        if getattr(m, "is_cross_attention", False):
            raise PlanError(f"{type(m).__name__} is cross-attention: only self-attention "
                            "patterns are recovered")
        return AttentionReader(m, "GPT-2", int(m.split_size // m.head_dim), ("c_attn",), _gpt2)
    if _is_linear(getattr(m, "q_proj", None)) and _is_linear(getattr(m, "k_proj", None)) \
            and isinstance(getattr(m, "head_dim", None), int):
        reads = tuple(n for n in ("q_proj", "k_proj", "q_norm", "k_norm") if hasattr(m, n))
        return AttentionReader(m, "Llama", _rows(m, "q_proj") // m.head_dim, reads, _llama)
    if _is_linear(getattr(m, "query", None)) and _is_linear(getattr(m, "key", None)) \
            and isinstance(getattr(m, "attention_head_size", None), int):
        return AttentionReader(m, "BERT", _rows(m, "query") // m.attention_head_size,
                               ("query", "key"), _bert)
    if _is_linear(getattr(m, "qkv", None)) and isinstance(getattr(m, "n_head", None), int) \
            and isinstance(getattr(m, "mask", None), torch.Tensor) and hasattr(m, "probs"):
        return AttentionReader(m, "demo:lm", int(m.n_head), ("qkv", "probs"), _demo)
    return None


def attention_reader(root: nn.Module, path: str) -> tuple[str, AttentionReader]:
    """The path of the module that computes ``path``'s pattern and its reader; a
    :class:`PlanError` that says why for a path that is not attention Hookscope can read."""
    try:
        module = root.get_submodule(path)
    except AttributeError:
        raise PlanError(f"the model has no layer {path!r}; name an attention module (see the "
                        "layer tree), e.g. transformer.h.1.attn") from None
    reader = _reader(module)
    if reader is not None:
        return path, reader
    # A wrapper around the attention proper (BertAttention: self + output)
    inner = [(name, r) for name, child in module.named_children()
             if (r := _reader(child)) is not None]
    if len(inner) == 1:
        return f"{path}.{inner[0][0]}" if path else inner[0][0], inner[0][1]
    raise PlanError(f"{path!r} ({type(module).__name__}) is not an attention module whose "
                    "probabilities Hookscope can recover (GPT-2, Llama family, BERT family, "
                    "demo:lm and nn.MultiheadAttention are); name one, e.g. transformer.h.1.attn")


def attention_modules(root: nn.Module) -> list[str]:
    """The paths of ``root``'s modules whose patterns can be recovered, in model order
    (what a view offers when no layer is named). A module reached by two paths is listed once."""
    seen: set[int] = set()
    out = []
    for path, m in root.named_modules():
        if id(m) in seen:
            continue
        seen.add(id(m))
        try:
            if _reader(m) is not None:
                out.append(path)
        except PlanError:  # cross-attention: recognised, and refused
            continue
    return out


__all__ = ["AttentionReader", "arguments_of", "attention_modules", "attention_reader", "pattern"]
