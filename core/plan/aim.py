"""Acting on part of a tensor: pick what an :class:`~hookscope.core.plan.at.At` selects, let a
kind change that part, write it back into a copy.

This is what gives every intervention kind ``at=`` without the kind knowing:
:meth:`Intervention.apply` calls :func:`aimed` with the kind's own
``apply_tensor``. The rules:

* ``positions``: the sequence axis of a (batch, sequence, features) tensor (dim 1;
  dim 0 for an ``nn.MultiheadAttention`` without ``batch_first``). Tensors of other
  ranks in the same output (attention weights, caches) pass through unchanged; an
  output with no such tensor (an image feature map (N, C, H, W), a (batch, features)
  vector) is refused: positions are for token sequences.
* ``heads``: the last axis, read as (heads, head_dim); only at a head site (the input
  of an attention's output projection, :mod:`hookscope.core.plan.heads`).
* ``units``: the feature axis (:func:`~hookscope.core.plan.feature_axis.feature_dim`), or
  within each head when heads are picked.
* A source tensor (patch, reference mean) is narrowed the same way on its own
  lengths: ``pos=-1`` takes the source's last token for the target's last token.
  If the two pick different numbers of positions, the run is refused with both
  lengths (no silent truncation or padding).
* Inside :func:`prompt_positions` (generation), ``positions`` count in the prompt, not in
  the tensor at hand: ``-1`` is the prompt's last token at every step, however long the
  sequence has grown, and a cached step that feeds only new tokens holds no prompt
  position, so the kind leaves it alone. ``None`` (all) is still the whole axis: every
  token, the prompt's and the generated ones; ``gen`` picks the generated ones (the
  tokens fed back after the prompt). The source is narrowed on its own lengths as before.
"""

from __future__ import annotations

import contextlib
from contextvars import ContextVar
from typing import Callable, Iterator

import torch
from torch import nn

from .at import At, Generated, resolve
from .feature_axis import feature_dim
from ..base.errors import PlanError

Change = Callable[[torch.Tensor, "torch.Tensor | None"], torch.Tensor]

#: ``(prompt length, offset of the tensor's first position)`` while a generation step runs.
_PROMPT: ContextVar[tuple[int, int] | None] = ContextVar("hookscope_prompt_positions",
                                                         default=None)


@contextlib.contextmanager
def prompt_positions(length: int, offset: int = 0) -> Iterator[None]:
    """Inside: ``@pos=`` selections count in a prompt of ``length`` tokens, and the
    sequence axis of the tensors the hooks see starts at position ``offset`` (0 for a
    whole sequence; a cached step feeds only its new tokens). Per thread (a context
    variable), undone on exit."""
    token = _PROMPT.set((length, offset))
    try:
        yield
    finally:
        _PROMPT.reset(token)


def _positions(sel, n: int, where: str, framed: bool) -> list[int] | None:
    """The positions ``sel`` picks on a sequence axis of length ``n``: in the prompt's
    frame when one is set and ``framed`` (the target, not a source)."""
    frame = _PROMPT.get() if framed else None
    if frame is None or sel is None:
        return resolve(sel, n, "positions", where)
    length, offset = frame
    prompt = tuple(i for i in sel if not isinstance(i, Generated))
    picked = resolve(prompt, length, "positions", f"{where} (counted in the prompt)") if prompt else []
    assert picked is not None
    if len(prompt) < len(sel):  # gen: every position after the prompt
        picked = sorted({*picked, *range(max(length, offset), offset + n)})
    return [i - offset for i in picked if offset <= i < offset + n]


def sequence_axis(t: torch.Tensor, module: nn.Module | None) -> int | None:
    """The token axis of ``t``, or ``None`` when it has none (not (batch, seq, features))."""
    if t.dim() != 3:
        return None
    if isinstance(module, nn.MultiheadAttention) and not module.batch_first:
        return 0
    return 1 if feature_dim(t, module) == 2 else None


def fits(t: torch.Tensor, at: At, module: nn.Module | None, n_heads: int | None) -> bool:
    """Whether ``at`` can act on tensor ``t`` (others in the same output pass through)."""
    if at.positions is not None and sequence_axis(t, module) is None:
        return False
    if at.heads is not None and (n_heads is None or t.dim() < 1 or t.shape[-1] % n_heads):
        return False
    return t.dim() >= 1 or at.units is None


def _axes(t: torch.Tensor, at: At, module: nn.Module | None, n_heads: int | None,
          where: str, framed: bool = False) -> tuple[torch.Tensor, list[tuple[int, list[int] | None, str]]]:
    """``t`` (split into heads if asked) and the (axis, indices, name) to narrow."""
    x = t
    dims: list[tuple[int, list[int] | None, str]] = []
    if at.positions is not None:
        seq = sequence_axis(t, module)
        assert seq is not None
        dims.append((seq, _positions(at.positions, t.shape[seq], where, framed), "positions"))
    if at.heads is not None:
        assert n_heads is not None
        x = t.unflatten(-1, (n_heads, t.shape[-1] // n_heads))
        dims.append((x.dim() - 2, resolve(at.heads, n_heads, "heads", where), "heads"))
        unit_axis = x.dim() - 1
    else:
        unit_axis = feature_dim(t, module)
    if at.units is not None:
        if t.dim() == 0:
            raise PlanError(f"units: the output{where} is a scalar; it has no units to pick")
        dims.append((unit_axis, resolve(at.units, x.shape[unit_axis], "units", where), "units"))
    return x, [d for d in dims if d[1] is not None]


def _narrow(x: torch.Tensor, dims: list[tuple[int, list[int] | None, str]]) -> list[torch.Tensor]:
    parts = [x]
    for axis, idx, _ in dims:
        parts.append(parts[-1].index_select(axis, torch.tensor(idx, device=x.device)))
    return parts


def aimed(t: torch.Tensor, source: torch.Tensor | None, at: At, change: Change,
          module: nn.Module | None = None, n_heads: int | None = None,
          where: str = "") -> torch.Tensor:
    """``t`` with ``change(part, source_part)`` written over the part ``at`` selects.

    ``source``: the matching tensor of a source run, narrowed the same way (on its
    own lengths), or ``None``. The result is a new tensor; ``t`` is not modified.
    """
    x, dims = _axes(t, at, module, n_heads, where, framed=True)
    if any(not idx for _, idx, _ in dims):
        # A cached generation step holds none of the selected prompt positions, or @pos=gen
        # in a single run: nothing is selected, nothing changes.
        return t
    parts = _narrow(x, dims)
    src_part = None
    if source is not None:
        if source.dim() != t.dim():
            raise PlanError(f"the source output{where} is {source.dim()}-d but the target's is "
                            f"{t.dim()}-d; give a source input of the same kind")
        sx, sdims = _axes(source, at, module, n_heads, where)
        for (axis, idx, name), (_, sidx, _) in zip(dims, sdims):
            if len(idx or ()) != len(sidx or ()):
                raise PlanError(
                    f"{name} {at.words()}: the target has {x.shape[axis]} {name} and the source "
                    f"{sx.shape[axis]}{where}, so the selection picks {len(idx or ())} in the target "
                    f"but {len(sidx or ())} in the source; pick {name} that exist in both "
                    "(e.g. @pos=-1, the last of each) or inputs of the same length")
        src_part = _narrow(sx, sdims)[-1]
    new = change(parts[-1], src_part)
    if tuple(new.shape) != tuple(parts[-1].shape):
        raise PlanError(f"the change gave {tuple(new.shape)} for the selected part "
                        f"{tuple(parts[-1].shape)}{where}")
    for (axis, idx, _), base in zip(reversed(dims), reversed(parts[:-1])):
        out = base.clone()
        out.index_copy_(axis, torch.tensor(idx, device=base.device), new.to(out.dtype))
        new = out
    if not dims:
        new = new.clone() if new is t else new
    return new.reshape(t.shape) if new.shape != t.shape else new
