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

from .errors import HookscopeError


class NestingError(HookscopeError):
    """A value nested deeper than Python can walk, or one that holds itself."""


NESTING_MESSAGE = ("a value is nested deeper than Python can walk (thousands of levels of "
                   "tuples, lists or dicts), or holds itself (a dict or list inside itself): "
                   "return the tensors in a flat tuple or dict")


def map_tensors(fn: Callable[[torch.Tensor], torch.Tensor], value: Any) -> Any:
    """Apply ``fn`` to every tensor leaf of ``value``; keep the structure."""
    return map_tensors_keyed(lambda t, _key: fn(t), value)


def map_tensors_keyed(fn: Callable[[torch.Tensor, str], Any], value: Any, prefix: str = "") -> Any:
    """Like :func:`map_tensors`, and ``fn`` also gets the leaf's key (see :func:`tensor_leaves`).

    Raises :class:`NestingError` for a value too deep to walk or one that holds itself.
    """
    try:
        return _map_keyed(fn, value, prefix)
    except RecursionError as exc:
        raise NestingError(NESTING_MESSAGE) from exc


def _map_keyed(fn: Callable[[torch.Tensor, str], Any], value: Any, prefix: str) -> Any:
    if isinstance(value, torch.Tensor):
        return fn(value, prefix)
    if isinstance(value, tuple):
        items = [_map_keyed(fn, v, f"{prefix}[{i}]") for i, v in enumerate(value)]
        return type(value)(*items) if hasattr(value, "_fields") else tuple(items)
    if isinstance(value, list):
        return [_map_keyed(fn, v, f"{prefix}[{i}]") for i, v in enumerate(value)]
    if isinstance(value, dict):
        return type(value)((k, _map_keyed(fn, v, f"{prefix}[{k!r}]")) for k, v in value.items())
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        changes = {f.name: _map_keyed(fn, getattr(value, f.name), f"{prefix}.{f.name}")
                   for f in dataclasses.fields(value) if f.init}
        return dataclasses.replace(value, **changes)
    return value


def tensor_leaves(value: Any, prefix: str = "") -> list[tuple[str, torch.Tensor]]:
    """Every tensor leaf of ``value`` with a key saying where it sits.

    Keys read like Python: ``""`` for a bare tensor, ``"[0]"``, ``"['logits']"``,
    ``".hidden"``. Order is the structure's own order, so the first leaf is the
    layer's "main" output for tuples such as ``(attn_output, attn_weights)``.
    Raises :class:`NestingError` for a value too deep to walk or one that holds itself.
    """
    out: list[tuple[str, torch.Tensor]] = []
    try:
        _leaves(value, prefix, out)
    except RecursionError as exc:
        raise NestingError(NESTING_MESSAGE) from exc
    return out


def _leaves(value: Any, prefix: str, out: list[tuple[str, torch.Tensor]]) -> None:
    if isinstance(value, torch.Tensor):
        out.append((prefix, value))
    elif isinstance(value, (tuple, list)):
        for i, v in enumerate(value):
            _leaves(v, f"{prefix}[{i}]", out)
    elif isinstance(value, dict):
        for k, v in value.items():
            _leaves(v, f"{prefix}[{k!r}]", out)
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        for f in dataclasses.fields(value):
            _leaves(getattr(value, f.name), f"{prefix}.{f.name}", out)
