"""The registry of intervention kinds: name -> class.

Everything that offers "every kind" reads this one table: the CLI's
``--intervene PATH=KIND[:ARGS]`` parser, session files (:func:`from_dict`),
the exported script (each kind's ``leaf_function``), and the window's
Intervention column (its chooser lists :func:`kinds`, its editor is generated
from :meth:`Intervention.params`). A new kind is a class plus one
:func:`register` call; nothing else changes.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from .at import At, split_suffix
from ..base.errors import PlanError
from .intervention_base import Intervention, use_registry
from .directions import Add, Project
from .interventions import Clamp, MeanAblate, Noise, Patch, Scale, Zero

_KINDS: dict[str, type[Intervention]] = {}


def register(cls: type[Intervention]) -> type[Intervention]:
    """Add a kind (usable as a class decorator); its ``name`` must be new, or the same class."""
    if not (isinstance(cls, type) and issubclass(cls, Intervention)) or not cls.name \
            or cls.name == Intervention.name:
        raise TypeError(f"{cls!r} is not an Intervention subclass with its own name")
    known = _KINDS.get(cls.name)
    if known is not None and known is not cls and known.__qualname__ != cls.__qualname__:
        raise ValueError(f"an intervention kind named {cls.name!r} is already registered ({known!r})")
    _KINDS[cls.name] = cls
    return cls


def unregister(name: str) -> None:
    """Remove a kind (tests that register one of their own clean up with this)."""
    _KINDS.pop(name, None)


def kinds() -> dict[str, type[Intervention]]:
    """Every registered kind, by name, in registration order."""
    return dict(_KINDS)


def get_kind(name: str) -> type[Intervention]:
    """The class registered as ``name``; a :class:`PlanError` listing the kinds otherwise."""
    try:
        return _KINDS[name.strip().lower()]
    except KeyError:
        raise PlanError(f"unknown intervention kind {name!r}; the kinds are "
                        f"{', '.join(sorted(_KINDS))}") from None


def parse_intervention(text: str) -> Intervention:
    """``"KIND[:ARGS][@pos=SEL][@heads=SEL][@units=SEL]"`` -> an intervention
    (``"clamp:-1:1"``, ``"zero:3,7"``, ``"noise:0.1:7"``, ``"zero@heads=0,5"``,
    ``"scale:0@pos=3:6"``; the suffix is :class:`~hookscope.core.plan.at.At`)."""
    body, at = split_suffix(text.lstrip())  # a text: prompt keeps its trailing spaces
    name, _, args = body.partition(":")
    cls = get_kind(name)
    try:
        iv = cls.parse(args)
    except PlanError as exc:
        if cls.usage() in str(exc):
            raise
        raise PlanError(f"{exc}; write {cls.usage()}") from None
    return iv if at is None else with_at(iv, at)


def with_at(iv: Intervention, at: At | None) -> Intervention:
    """A copy of ``iv`` acting where ``at`` says (``None``: the whole output)."""
    try:
        return dataclasses.replace(iv, at=at)  # type: ignore[type-var]
    except PlanError:
        raise
    except (TypeError, ValueError) as exc:
        raise PlanError(f"{iv.name}: {exc}") from exc


def from_dict(data: Any) -> Intervention:
    """The intervention :meth:`Intervention.to_dict` wrote."""
    if not isinstance(data, dict) or not isinstance(data.get("kind"), str):
        raise PlanError(f"an intervention must be an object with a 'kind' "
                        f"({', '.join(sorted(_KINDS))}), got {data!r}")
    values = {k: v for k, v in data.items() if k != "kind"}
    for p in get_kind(data["kind"]).params():
        v = values.get(p.name)
        if p.type == "float" and isinstance(v, str):
            try:
                values[p.name] = float(v)  # "inf"/"-inf": JSON has no infinities
            except ValueError:
                raise PlanError(f"{data['kind']}: {p.name} must be a number, got {v!r}") from None
    return get_kind(data["kind"]).from_values(values)


def syntax_help() -> str:
    """One line per kind, for ``--help`` and error messages."""
    return ("; ".join(cls.usage() for cls in _KINDS.values())
            + "; any kind takes @pos=SEL @heads=SEL @units=SEL (SEL: 0,5 or 3:6 or -1 or last or all)")


use_registry(from_dict)

# The built-in kinds: one entry each.
register(Clamp)
register(Scale)
register(Zero)
register(MeanAblate)
register(Noise)
register(Patch)
register(Add)
register(Project)
