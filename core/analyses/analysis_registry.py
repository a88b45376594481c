"""The registry of analyses: name -> request class.

Everything that offers "every analysis" by name reads this one table: the CLI's
``hookscope analyse NAME --param KEY=VALUE`` (:func:`analysis_from_text` builds the request from
the typed values, by the dataclass fields' types) and a script's :func:`get_analysis`.
A new analysis is a frozen dataclass following :class:`~.analysis.Analysis` plus one
:func:`register_analysis` call; ``Session.analyse`` then runs it like the built-in ones.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from typing import Any, TypeVar

from ..base.errors import PlanError
from .analysis import Analysis
from .attention_patterns import AttentionRequest
from .generation import GenerateRequest
from .logit_lens import LensRequest
from .sae_features import SaeRequest
from .scanning import ScanJob
from .sweep import SweepRequest

A = TypeVar("A", bound=type)

_ANALYSES: dict[str, type] = {}


def register_analysis(cls: A) -> A:
    """Add an analysis (usable as a class decorator): a frozen dataclass with a ``name`` of its
    own (new, or the same class's) and a ``compute`` method."""
    name = getattr(cls, "name", None) if isinstance(cls, type) else None
    params = getattr(cls, "__dataclass_params__", None)
    if not isinstance(name, str) or not name or params is None or not params.frozen \
            or not callable(getattr(cls, "compute", None)):
        raise TypeError(f"{cls!r} is not a frozen dataclass with a name and compute(...)")
    known = _ANALYSES.get(name)
    if known is not None and known is not cls and known.__qualname__ != cls.__qualname__:
        raise ValueError(f"an analysis named {name!r} is already registered ({known!r})")
    _ANALYSES[name] = cls
    return cls


def unregister_analysis(name: str) -> None:
    """Remove an analysis (tests that register one of their own clean up with this)."""
    _ANALYSES.pop(name, None)


def registered_analyses() -> dict[str, type]:
    """Every registered analysis, by name, in registration order."""
    return dict(_ANALYSES)


def get_analysis(name: str) -> type:
    """The request class registered as ``name``; a :class:`PlanError` listing the names otherwise."""
    try:
        return _ANALYSES[name.strip().lower()]
    except KeyError:
        raise PlanError(f"unknown analysis {name!r}; the analyses are "
                        f"{', '.join(sorted(_ANALYSES))}") from None


_SCALARS: dict[Any, Any] = {int: int, float: float, str: str}


def _value(name: str, field: str, hint: Any, text: str) -> Any:
    """``text`` as the field's type: a number, text, a yes/no, or a comma-separated tuple."""
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        if text.lower() == "none" and type(None) in typing.get_args(hint):
            return None
        for option in args:  # the first type the text reads as
            try:
                return _value(name, field, option, text)
            except PlanError:
                continue
        raise PlanError(f"{name}: {field} must be one of {hint}, got {text!r}")
    if hint is bool:
        if text.lower() in ("1", "true", "yes", "on"):
            return True
        if text.lower() in ("0", "false", "no", "off"):
            return False
        raise PlanError(f"{name}: {field} must be true or false, got {text!r}")
    if typing.get_origin(hint) is tuple:
        item = args[0] if args else str
        return tuple(_value(name, field, item, t.strip()) for t in text.split(",") if t.strip())
    convert = _SCALARS.get(hint)
    if convert is None:
        raise PlanError(f"{name}: {field} is not a parameter the command line can write "
                        f"({hint}); use the analysis from Python (Session.analyse)")
    try:
        return convert(text)
    except ValueError:
        raise PlanError(f"{name}: {field} must be {convert.__name__}, got {text!r}") from None


def analysis_from_text(name: str, values: dict[str, str]) -> Analysis[Any]:
    """The request of analysis ``name`` with ``values`` typed as text (``{"top_k": "3"}``),
    each converted to its field's type; unknown or missing parameters are refused with the
    parameters the analysis takes."""
    cls = get_analysis(name)
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init}
    unknown = sorted(set(values) - set(fields))
    if unknown:
        raise PlanError(f"{name} takes no parameter {', '.join(map(repr, unknown))}; its "
                        f"parameters are {', '.join(fields) or 'none'}")
    kwargs = {k: _value(name, k, hints[k], v) for k, v in values.items()}
    missing = [k for k, f in fields.items() if k not in kwargs
               and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING]
    if missing:
        raise PlanError(f"{name} needs {', '.join(missing)}: give --param {missing[0]}=VALUE")
    try:
        return cls(**kwargs)
    except (TypeError, ValueError) as exc:
        raise PlanError(f"{name}: {exc}") from exc


# The built-in analyses: one entry each.
register_analysis(LensRequest)
register_analysis(GenerateRequest)
register_analysis(SaeRequest)
register_analysis(SweepRequest)
register_analysis(ScanJob)
register_analysis(AttentionRequest)

__all__ = ["analysis_from_text", "get_analysis", "register_analysis", "registered_analyses", "unregister_analysis"]
