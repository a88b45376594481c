"""Walking nested layer outputs: tensors inside tuples, lists, dicts and dataclasses.

A layer may return a tensor or a nested structure (tuple, namedtuple, list,
dict, dataclass such as a Hugging Face ``ModelOutput``) of tensors and other
things. These helpers visit every tensor leaf and pass everything else
through unchanged, so an intervention or a capture works on nested outputs
for free. Leaf keys read like Python (``""``, ``"[0]"``, ``"['logits']"``,
``".hidden"``) and are the same in :func:`tensor_leaves` and
:func:`map_tensors_keyed`, so two outputs of one layer (a run on the target
and one on a source input) can be matched leaf by leaf.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

import torch


def map_tensors(fn: Callable[[torch.Tensor], torch.Tensor], value: Any) -> Any:
    """Apply ``fn`` to every tensor leaf of ``value``; keep the structure."""
    return map_tensors_keyed(lambda t, _key: fn(t), value)


def map_tensors_keyed(fn: Callable[[torch.Tensor, str], Any], value: Any, prefix: str = "") -> Any:
    """Like :func:`map_tensors`, and ``fn`` also gets the leaf's key (see :func:`tensor_leaves`)."""
    if isinstance(value, torch.Tensor):
        return fn(value, prefix)
    if isinstance(value, tuple):
        items = [map_tensors_keyed(fn, v, f"{prefix}[{i}]") for i, v in enumerate(value)]
        return type(value)(*items) if hasattr(value, "_fields") else tuple(items)
    if isinstance(value, list):
        return [map_tensors_keyed(fn, v, f"{prefix}[{i}]") for i, v in enumerate(value)]
    if isinstance(value, dict):
        return type(value)((k, map_tensors_keyed(fn, v, f"{prefix}[{k!r}]")) for k, v in value.items())
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        changes = {f.name: map_tensors_keyed(fn, getattr(value, f.name), f"{prefix}.{f.name}")
                   for f in dataclasses.fields(value) if f.init}
        return dataclasses.replace(value, **changes)
    return value


def tensor_leaves(value: Any, prefix: str = "") -> list[tuple[str, torch.Tensor]]:
    """Every tensor leaf of ``value`` with a key saying where it sits.

    Keys read like Python: ``""`` for a bare tensor, ``"[0]"``, ``"['logits']"``,
    ``".hidden"``. Order is the structure's own order, so the first leaf is the
    layer's "main" output for tuples such as ``(attn_output, attn_weights)``.
    """
    out: list[tuple[str, torch.Tensor]] = []
    if isinstance(value, torch.Tensor):
        out.append((prefix, value))
    elif isinstance(value, (tuple, list)):
        for i, v in enumerate(value):
            out.extend(tensor_leaves(v, f"{prefix}[{i}]"))
    elif isinstance(value, dict):
        for k, v in value.items():
            out.extend(tensor_leaves(v, f"{prefix}[{k!r}]"))
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        for f in dataclasses.fields(value):
            out.extend(tensor_leaves(getattr(value, f.name), f"{prefix}.{f.name}"))
    return out
