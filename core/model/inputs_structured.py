"""Inputs with structure: keywords, positional + keyword, text through a tokenizer, random alike.

Spec forms handled here (dispatched from :func:`~.inputs.parse_input`):

==========================================  =========================================
``{"input_ids": [[1, 2]], "attention_mask":  keyword inputs (a Python dict literal or
[[1, 1]]}``                                  JSON): ``model(input_ids=..., ...)``
``([[1, 2]], {"attention_mask": [[1, 1]]})``  positional and keyword together: a tuple
                                             whose last item is a dict; the items
                                             before it are positional
``text:PROMPT``                              the prompt through the model's tokenizer
                                             (``hf:`` models, ``demo:lm``), shaped like
                                             the example input (ids, or a dict of
                                             ids/attention_mask/...)
``file.safetensors``                         a dict of named tensors, as keywords
``random[:SHAPE]`` with a dict/tuple example  every leaf of the example, each random
==========================================  =========================================

Each value's dtype follows the same-named (or same-place) tensor of the
example input, else what ``torch.tensor`` infers (whole numbers -> int64).
"""

from __future__ import annotations

import ast
import json
import os
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load

from .budget import check_input_size
from ..base.call_args import CallArgs
from ..base.errors import InputError
from ..base.regular_file import open_regular
from ..base.user_text import shorten
from ..base.nested import map_tensors, tensor_leaves


def _literal(text: str) -> Any:
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        pass
    except (RecursionError, MemoryError) as exc:  # the parser gives up on very deep nesting
        raise InputError(f"input literal of {len(text)} characters is nested too deeply to read: "
                         "use a .npy, .pt or .safetensors file") from exc
    try:
        return json.loads(text)  # JSON's true/false/null
    except RecursionError as exc:
        raise InputError(f"input literal of {len(text)} characters is nested too deeply to read: "
                         "use a .npy, .pt or .safetensors file") from exc
    except ValueError as exc:
        raise InputError(f"input {text[:60]!r} is neither a Python literal nor JSON: write e.g. "
                         '{"input_ids": [[1, 2, 3]], "attention_mask": [[1, 1, 1]]}') from exc


def _tensor(value: Any, like: torch.Tensor | None, where: str) -> torch.Tensor:
    if isinstance(value, torch.Tensor):
        return value
    try:
        return torch.tensor(value, dtype=like.dtype if like is not None else None)
    except (TypeError, ValueError, RuntimeError, OverflowError, RecursionError) as exc:
        raise InputError(f"input {where} is not a rectangular list of numbers: {exc}") from exc


def _example_kwargs(example: Any) -> dict[str, Any]:
    if isinstance(example, dict):
        return example
    if isinstance(example, CallArgs):
        return example.kwargs
    return {}


def _example_args(example: Any) -> tuple[Any, ...]:
    if isinstance(example, CallArgs):
        return example.args
    if isinstance(example, tuple):
        return example
    return () if isinstance(example, dict) or example is None else (example,)


def _keywords(value: dict, example: Any, text: str) -> dict[str, torch.Tensor]:
    like = _example_kwargs(example)
    out = {}
    for key, v in value.items():
        if not isinstance(key, str) or not key.isidentifier():
            raise InputError(f"keyword {key!r} in {text[:60]!r} is not a Python name")
        ex = like.get(key)
        out[key] = _tensor(v, ex if isinstance(ex, torch.Tensor) else None, repr(key))
    return out


def is_structured_literal(text: str) -> bool:
    """Whether ``text`` is a dict literal or a tuple literal ending in a dict."""
    if text.startswith("{"):
        return True
    if not text.startswith("("):
        return False
    try:
        value = _literal(text)
    except InputError:
        return False
    return isinstance(value, tuple) and bool(value) and isinstance(value[-1], dict)


def parse_structured(text: str, example: Any) -> Any:
    """A dict literal -> keyword inputs; ``(pos..., {kw})`` -> :class:`CallArgs`."""
    value = _literal(text)
    if isinstance(value, dict):
        return _keywords(value, example, text)
    if isinstance(value, tuple) and value and isinstance(value[-1], dict):
        ex_args = _example_args(example)
        args = tuple(_tensor(v, ex_args[i] if i < len(ex_args) and isinstance(ex_args[i], torch.Tensor)
                             else None, f"positional {i}") for i, v in enumerate(value[:-1]))
        return CallArgs(args, _keywords(value[-1], example, text))
    raise InputError(f"input {text[:60]!r}: write a dict of keyword inputs, or a tuple of "
                     "positional inputs ending in a dict of keyword inputs")


def parse_text(text: str, example: Any, codec: Any) -> Any:
    """``text:PROMPT`` -> token ids shaped like the example (a tensor, or the tokenizer's dict)."""
    prompt = text.removeprefix("text:")
    if codec is None:
        raise InputError("text: inputs need a model with a tokenizer (hf: models saved with "
                         "theirs, demo:lm); give this model token ids instead, e.g. [[1, 2, 3]]")
    if not prompt:
        raise InputError("text: needs a prompt after the colon, e.g. text:The cat sat")
    if hasattr(codec, "encode_batch") and isinstance(example, dict):
        enc = codec.encode_batch(prompt)
        keys = [k for k in example if k in enc] or list(enc)
        return {k: torch.as_tensor(enc[k]).to(example[k].dtype if k in example else torch.long)
                for k in keys}
    ids = codec.encode(prompt)
    if not ids:
        raise InputError(f"the tokenizer made no tokens of {prompt!r}")
    dtype = torch.long
    leaves = tensor_leaves(example) if example is not None else []
    if leaves and not leaves[0][1].is_floating_point():
        dtype = leaves[0][1].dtype
    t = torch.tensor([ids], dtype=dtype)
    if isinstance(example, dict):  # keywords without the tokenizer's own dict
        key = "input_ids" if "input_ids" in example else next(iter(example))
        out = {key: t}
        if "attention_mask" in example:
            out["attention_mask"] = torch.ones_like(t)
        return out
    return t


def load_safetensors_input(path: Path) -> dict[str, torch.Tensor]:
    """A ``.safetensors`` file's tensors, by name (keyword inputs)."""
    with open_regular(path, "input file") as f:  # never a FIFO or a device
        check_input_size(os.fstat(f.fileno()).st_size, path.name)
        data = f.read()
    try:
        tensors = load(data)
    except Exception as exc:  # a corrupt or foreign file
        raise InputError(f"cannot read {path} as safetensors: {exc}") from exc
    if not tensors:
        raise InputError(f"{path} holds no tensor")
    return dict(tensors)


def random_like(text: str, example: Any, seed: int, shape: tuple[int, ...] | None,
                dtype: torch.dtype | None, high: int | None) -> Any:
    """``random`` for a dict/tuple/:class:`CallArgs` example: every leaf random, same structure.

    A leaf takes ``shape`` when given and of the leaf's rank (else its own
    shape), ``dtype`` when given and floating (else its own). Floats are
    normal, integers uniform in ``[0, high)`` (``high`` defaults to the
    leaf's maximum + 1), and an all-ones mask (``attention_mask``) stays ones.
    """

    g = torch.Generator().manual_seed(seed)

    def size_of(t: torch.Tensor) -> tuple[int, ...]:
        return shape if shape is not None and len(shape) == t.dim() else tuple(t.shape)

    # every leaf together within the budget, before any of them is made
    total = 0
    for _, t in tensor_leaves(example):
        numel = 1
        for n in size_of(t):
            numel *= n
        total += numel * max(t.element_size(), 4)
    what = f"random input {shorten('x'.join(map(str, shape)), 60)}" if shape else "random input"
    check_input_size(total, f"{what} (every tensor of the example input)")

    def make(t: torch.Tensor) -> torch.Tensor:
        size = size_of(t)
        if t.is_floating_point():
            return torch.randn(size, generator=g).to(dtype if dtype is not None and dtype.is_floating_point
                                                      else t.dtype)
        if t.dtype == torch.bool or (t.numel() and bool((t == 1).all())):
            return torch.ones(size, dtype=t.dtype)  # a mask: every position counts
        top = high if high is not None else (int(t.max()) + 1 if t.numel() else 2)
        return torch.randint(0, max(top, 1), size, generator=g, dtype=t.dtype)

    return map_tensors(make, example)


def is_structured(example: Any) -> bool:
    return isinstance(example, (dict, CallArgs)) or (isinstance(example, tuple)
                                                      and not hasattr(example, "_fields"))
