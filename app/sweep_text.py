"""The Sweep dock's text: its ``NAME=VALUE; ...`` fields read, the template written from the
intervention a person set in the Intervention panel, and each cell bound to the dock's source
input (a bare patch) and vectors (``add:v:{alpha}`` with ``v=diff:text:A|text:B``)."""

from __future__ import annotations

import re
from typing import Any, Callable

import torch

from hookscope.core import Intervention, MeanAblate, Patch, PlanError
from hookscope.core.base import typed_text
from hookscope.core.analyses import resolve_vectors
from hookscope.core.plan import named_vectors, with_bare_sources

#: sweep axis name -> the ``@`` key of the template it fills
AT_KEYS = {"pos": "pos", "position": "pos", "positions": "pos", "unit": "units",
           "units": "units", "head": "heads", "heads": "heads"}
LAYER_AXES = ("layer", "layers", "path")


def pairs(text: str, what: str) -> dict[str, str]:
    """``'a=1; b=2'`` -> ``{'a': '1', 'b': '2'}`` (each split at its first '=')."""
    out: dict[str, str] = {}
    for piece in text.split(";"):
        if not piece.strip():
            continue
        key, sep, value = piece.partition("=")
        if not sep or not key.strip() or not value.strip():
            raise PlanError(f"{what} {piece.strip()!r}: write NAME=VALUE, several separated by ';'")
        out[key.strip()] = typed_text(value)  # a template's prompt keeps its trailing spaces
    if not out:
        raise PlanError(f"{what}: give at least one NAME=VALUE")
    return out


def source_binder(source: str) -> Callable[[dict], dict]:
    """A cell's ``{path: intervention}`` with a bare patch (or mean-ablate) given ``source``."""
    src = source.lstrip() if source.strip() else None  # a prompt keeps its trailing spaces

    def bind(ivs: dict) -> dict:
        return with_bare_sources(ivs, src, src, "patch needs a source input: fill in "
                                 "'Source input' (e.g. text:the dog sat on the)")

    return bind


def vector_specs(text: str) -> dict[str, str]:
    """The Vectors field, ``v=diff:text:A|text:B; w=FILE`` -> ``{name: spec}`` (empty: none)."""
    return pairs(text, "vectors") if text.strip() else {}


def cell_binder(source: str, vectors: dict[str, str], lm: Any,
                compute: bool = True) -> Callable[[dict], dict]:
    """A cell's ``{path: intervention}`` with a bare patch given ``source`` and each vector
    named in ``vectors`` given its values, as ``hookscope sweep --vector`` binds them: a file
    read once, a ``diff:`` computed at each layer that uses it, once per layer for all the
    cells (on the thread that calls the binder: the runner's). ``compute=False``: a
    ``diff:`` is left as its spec (nothing runs), to check a grid before a run."""
    by_source = source_binder(source)
    memo: dict = {}

    def bind(ivs: dict) -> dict:
        out = by_source(ivs)
        if not named_vectors(out):
            return out
        module = lm.module if compute else None
        param = next(lm.module.parameters(), None) if compute else None
        return resolve_vectors(module, out, vectors, lm.example_input, lm.meaning.codec,
                               device=param.device if param is not None else None, memo=memo)

    return bind


def _spell(name: str, v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, bool):
        return str(v).lower()
    if isinstance(v, (int, float, str)):
        return repr(v) if isinstance(v, float) else str(v)
    if isinstance(v, (tuple, list)) and all(isinstance(x, (int, float)) for x in v):
        return ",".join(map(str, v))
    what = "a tensor" if isinstance(v, torch.Tensor) else f"a {type(v).__name__}"
    raise PlanError(f"the {name} of this intervention is {what}, which a template cannot "
                    "spell: type the template, or run the sweep from Python with the "
                    "intervention itself (Session.sweep)")


def template_from(path: str, iv: Intervention | None, axes: str) -> tuple[str, str | None]:
    """The template for the intervention ``iv`` set on ``path``, its layer and positions (units,
    heads) made the placeholders of the axes that sweep them; and the source input a patch
    names (for the Source field), else ``None``."""
    if not path or iv is None:
        raise PlanError("select a layer and set its intervention in the Intervention panel "
                        "first; 'From editor' turns it into the sweep's template")
    names = [k.strip() for k, _, _ in (p.partition("=") for p in axes.split(";")) if k.strip()]
    source: str | None = None
    values = iv.values()
    if isinstance(iv, (Patch, MeanAblate)):
        key = "source_input" if isinstance(iv, Patch) else "reference"
        given = values.get(key)
        if isinstance(given, str):
            source, values = given, {**values, key: None}
    args = [_spell(k, v) for k, v in values.items()]
    while args and not args[-1]:
        args.pop()
    text = ":".join([iv.name, *args])
    at = iv.where()
    suffix = at.suffix() if at is not None else ""
    for axis in names:
        at_key = AT_KEYS.get(axis)
        if at_key is None:
            continue
        if re.search(rf"@{at_key}=", suffix):
            suffix = re.sub(rf"@{at_key}=[^@]*", f"@{at_key}={{{axis}}}", suffix)
        else:
            suffix += f"@{at_key}={{{axis}}}"
    layer = next((f"{{{a}}}" for a in names if a in LAYER_AXES), path)
    return f"{layer}={text}{suffix}", source
