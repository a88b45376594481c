"""Input specs: the text a person types for "what to feed the model".

=====================  ================================================
``example`` or empty   the model's own example input
``[[1.0, 2.0, 3.0]]``  a Python literal; a tuple literal gives several inputs
``random:1x3x32x32``   random values, optional ``:seed=N``, ``:dtype=D``,
                       ``:high=N`` (integers in ``[0, N)``)
``file.npy``           a NumPy array (no pickles)
``file.pt``            a tensor, or a tuple/list/dict of tensors
                       (``torch.load(weights_only=True)``)
``{"input_ids": ...}``  keyword inputs; ``(x, {"mask": ...})`` positional
                       and keyword together; ``text:PROMPT`` through the
                       model's tokenizer; ``file.safetensors`` named tensors
                       (:mod:`.inputs_structured`)
``digit.png``          an image (PNG, JPEG, BMP, GIF, WebP, TIFF only), values in [0, 1],
                       shaped like the example input (N x C x H x W):
                       grey or RGB to match C, resized to H x W; append
                       ``:invert`` for dark ink on a light page
=====================  ================================================

The dtype follows the model's example input when there is one (so a token
model gets integers), else float32.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np
import torch

from .budget import check_input_size
from ..base.errors import InputError
from .input_checks import check_npy, check_torch_file, open_image
from .inputs_structured import (is_structured, is_structured_literal, load_safetensors_input,
                                parse_structured, parse_text, random_like)
from ..base.nested import map_tensors, tensor_leaves
from ..base.regular_file import open_regular
from ..base.torch_load import load_tensors
from ..base.user_text import shorten, shown, user_path

_DTYPES = {
    "float32": torch.float32, "float": torch.float32, "float64": torch.float64,
    "double": torch.float64, "float16": torch.float16, "half": torch.float16,
    "bfloat16": torch.bfloat16, "int64": torch.int64, "long": torch.int64,
    "int32": torch.int32, "int": torch.int32, "bool": torch.bool,
}

SYNTAX_HELP = ("write a literal such as [[1.0, 2.0, 3.0]], random:1x3x32x32[:seed=N], "
               "example, or a path to a .npy/.pt file or an image")


def _example_dtype(example: Any) -> torch.dtype | None:
    leaves = tensor_leaves(example) if example is not None else []
    return leaves[0][1].dtype if leaves else None


def parse_input(text: str, example: Any = None, codec: Any = None) -> Any:
    """Turn an input spec into a tensor (or a tuple of tensors, a dict of keywords, CallArgs).

    ``codec``: the model's tokenizer (:class:`~.meaning.TextCodec`), for ``text:`` inputs.

    Raises :class:`InputError` with what to write instead when ``text`` cannot
    be understood.
    """
    raw = text or ""
    text = raw.strip()
    if text in ("", "example"):
        if example is None:
            raise InputError("this model has no example input (its factory returned only a module): "
                             "type one, e.g. [[1.0, 2.0, 3.0]] or random:1x3x32x32, or let the "
                             "factory return (module, example_input)")
        return map_tensors(lambda t: t.clone(), example)
    if text.startswith("random:") or text == "random":
        return _parse_random(text, example)
    if text.startswith("text:"):  # a prompt keeps its trailing spaces: they are tokens
        return parse_text(raw.lstrip(), example, codec)
    if is_structured_literal(text):
        return parse_structured(text, example)
    # Files first: "./x.npy" starts like a number but is a path.
    path = user_path(text)
    if path.suffix in (".npy", ".pt", ".pth"):
        return _load_file(path)
    if path.suffix == ".safetensors":
        return load_safetensors_input(path)
    invert = text.endswith(":invert")
    image = user_path(text.removesuffix(":invert"))
    if image.suffix.lower() in IMAGE_SUFFIXES:
        return load_image(image, example, invert)
    if text[0] in "[(-+0123456789.":
        return _parse_literal(text, example)
    raise InputError(f"cannot read input {shown(text)}: {SYNTAX_HELP}")


def _parse_literal(text: str, example: Any) -> Any:
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError) as exc:
        raise InputError(f"input {shown(text)} is not a valid literal ({exc.__class__.__name__}): "
                         + SYNTAX_HELP) from exc
    except (RecursionError, MemoryError) as exc:  # the parser gives up on very deep nesting
        raise InputError(f"input literal of {len(text)} characters is nested too deeply to read: "
                         "use a .npy or .pt file, or random:SHAPE") from exc
    dtype = _example_dtype(example) or torch.float32

    def to_tensor(v: Any) -> torch.Tensor:
        try:
            return torch.tensor(v, dtype=dtype)
        except (TypeError, ValueError, RuntimeError, OverflowError, RecursionError) as exc:
            raise InputError(f"input {shown(text)} is not a rectangular list of numbers: "
                             f"{str(exc)[:200]}") from exc

    if isinstance(value, tuple):
        return tuple(to_tensor(v) for v in value)
    return to_tensor(value)


def _parse_random(text: str, example: Any) -> torch.Tensor:
    parts = text.split(":")
    structured = example is not None and is_structured(example)
    if structured and (len(parts) < 2 or not parts[1] or "=" in parts[1]):
        parts.insert(1, "")  # a dict/tuple example gives every leaf its own shape
    elif len(parts) < 2 or not parts[1]:
        raise InputError("random input needs a shape, e.g. random:1x3x32x32")
    try:
        shape = tuple(int(s) for s in parts[1].lower().split("x")) if parts[1] else None
    except ValueError as exc:
        raise InputError(f"bad shape {shown(parts[1])} in {shown(text)}: write sizes joined by 'x', "
                         "e.g. random:1x3x32x32") from exc
    if shape is not None and any(s <= 0 for s in shape):
        raise InputError(f"bad shape {shown(parts[1])}: every size must be positive")
    opts: dict[str, str] = {}
    for p in parts[2:]:
        key, sep, val = p.partition("=")
        if not sep:
            raise InputError(f"bad option {shown(p)} in {shown(text)}: write key=value (seed=, dtype=, high=)")
        opts[key.strip()] = val.strip()
    unknown = set(opts) - {"seed", "dtype", "high"}
    if unknown:
        raise InputError(f"unknown option(s) {shown(sorted(unknown))} in {shown(text)}: use seed=, dtype=, high=")
    try:
        seed = int(opts.get("seed", 0))
        high = int(opts["high"]) if "high" in opts else None
    except ValueError as exc:
        raise InputError(f"seed and high must be integers in {shown(text)}") from exc
    if "dtype" in opts:
        if opts["dtype"] not in _DTYPES:
            raise InputError(f"unknown dtype {shown(opts['dtype'])}: use one of {sorted(_DTYPES)}")
        dtype = _DTYPES[opts["dtype"]]
    else:
        dtype = _example_dtype(example) or torch.float32
    try:
        g = torch.Generator().manual_seed(seed)
    except (RuntimeError, ValueError, OverflowError) as exc:
        raise InputError(f"seed {seed} is out of range: use a seed below 2**63") from exc
    if structured:  # every key of a dict example (attention_mask too), each its own kind
        return random_like(text, example, seed, shape, _DTYPES.get(opts.get("dtype", "")), high)
    assert shape is not None  # only a structured example goes without a shape
    numel = 1
    for n in shape:
        numel *= n
    check_input_size(numel * max(dtype.itemsize, 4), f"random input {shorten('x'.join(map(str, shape)), 60)}")
    try:
        if dtype.is_floating_point:
            return torch.randn(shape, generator=g).to(dtype)
    except RuntimeError as exc:  # e.g. more dimensions than torch allows
        raise InputError(f"cannot make random input {shown(parts[1])}: {str(exc)[:200]}") from exc
    if high is None:
        ex = tensor_leaves(example)[0][1] if example is not None and tensor_leaves(example) else None
        high = int(ex.max()) + 1 if ex is not None and ex.numel() else 2
    try:
        return torch.randint(0, max(high, 1), shape, generator=g, dtype=dtype)
    except (RuntimeError, OverflowError, ValueError) as exc:  # high beyond the dtype, ...
        raise InputError(f"cannot make random input {shown(text)}: {str(exc)[:200]}") from exc


def _load_file(path: Path) -> Any:
    # A regular file only: a FIFO or a symlink to /dev/zero is refused, never waited on.
    with open_regular(path, "input file") as f:
        return _load_open_file(path, f)


def _load_open_file(path: Path, f: BinaryIO) -> Any:
    if path.suffix == ".npy":
        check_npy(path, f)  # objects, size and truncation, from the header alone
        try:
            f.seek(0)
            arr = np.load(f, allow_pickle=False)
        except ValueError as exc:
            raise InputError(f"cannot read {path.name} as a .npy array: {str(exc)[:200]}") from exc
        except OSError as exc:
            raise InputError(f"cannot read {path} as a .npy array: {exc}") from exc
        if arr.dtype.kind not in "biuf":
            raise InputError(f"{path} holds {arr.dtype} values; save a numeric array")
        # native byte order: torch cannot take a big-endian array
        return torch.from_numpy(np.ascontiguousarray(arr.astype(arr.dtype.newbyteorder("="))))
    check_torch_file(path, f)
    try:
        value = load_tensors(f)
    except Exception as exc:  # torch raises several types for a bad or unsafe file
        raise InputError(f"cannot load {path} as tensors (weights_only=True refuses anything "
                         f"but tensors and plain containers): {str(exc).splitlines()[0]}") from exc
    if isinstance(value, list):
        value = tuple(value)
    if not tensor_leaves(value):
        raise InputError(f"{path} holds no tensor; save the input with torch.save(tensor, path)")
    return value


IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".gif", ".webp", ".tif", ".tiff")


def load_image(path: Path, example: Any = None, invert: bool = False) -> torch.Tensor:
    """An image file as a 1 x C x H x W float tensor in [0, 1].

    With a 4-D example input, C (1 = grey, 3 = RGB) and H x W follow it, so a
    photo of any size fits the model; without one the image keeps its size, RGB.
    """
    try:
        from PIL import Image  # lazy: Pillow takes ~20 ms to import
    except ImportError as exc:  # an optional dependency in some installs
        raise InputError("reading images needs Pillow: pip install pillow") from exc
    ex = tensor_leaves(example)[0][1] if example is not None and tensor_leaves(example) else None
    channels, size = 3, None
    if ex is not None and ex.dim() == 4:
        channels, size = int(ex.shape[1]), (int(ex.shape[3]), int(ex.shape[2]))
        if channels not in (1, 3):
            raise InputError(f"the model takes {channels}-channel images; an image file gives "
                             "1 (grey) or 3 (RGB): use a .npy or .pt input instead")
    with open_image(path, channels) as img:  # known formats only, within the budget
        img = img.convert("L" if channels == 1 else "RGB")
        if size is not None and img.size != size:
            img = img.resize(size, Image.Resampling.BILINEAR)
        arr = np.asarray(img, dtype=np.float32) / 255.0
    if invert:
        arr = 1.0 - arr
    t = torch.from_numpy(arr.copy())
    t = t.unsqueeze(0) if t.dim() == 2 else t.permute(2, 0, 1)
    return t.unsqueeze(0).to(ex.dtype if ex is not None and ex.is_floating_point() else torch.float32)
