"""Where inside a layer's output an intervention acts: :class:`At` (positions, heads, units).

Every kind takes ``at=At(...)``; the base (:meth:`Intervention.apply`) picks the
targeted part of each tensor, lets the kind change that part, and writes it back
into a copy (:mod:`hookscope.core.plan.aim`). Each axis is a selector:

* ``None`` (or ``"all"``): the whole axis;
* indices (negative ones count from the end; ``"last"`` is ``-1``);
* ranges ``a:b`` as Python slices (``b`` excluded, either end may be left out,
  clipped to the axis, so ``0:999999999999`` is the whole axis and allocates nothing);
* ``gen`` (positions only): the tokens a generation adds after the prompt, where
  positions count in the prompt (:func:`hookscope.core.plan.aim.prompt_positions`);
  a single run has none, so there it picks nothing (the kind changes nothing).

Text form (the CLI's suffix, session files): ``@pos=-1@heads=0,5@units=3:6``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Iterable

from ..base.errors import PlanError

#: The suffix names and the :class:`At` fields they set.
AXES = {"pos": "positions", "heads": "heads", "units": "units"}
#: The most items one selector may list (a range is one item, whatever its length).
MAX_ITEMS = 4096
_MAX_TEXT = 20_000
_INT = re.compile(r"^[+-]?\d{1,18}$")


@dataclass(frozen=True)
class Span:
    """A range ``start:stop`` along one axis, as a Python slice (``None``: open end)."""

    start: int | None = None
    stop: int | None = None

    def __str__(self) -> str:
        return f"{'' if self.start is None else self.start}:{'' if self.stop is None else self.stop}"


@dataclass(frozen=True)
class Generated:
    """``gen``: every token a generation adds after the prompt (see the module docstring)."""

    def __str__(self) -> str:
        return "gen"


#: The one ``gen`` item.
GEN = Generated()

Item = int | Span | Generated
Selector = tuple[Item, ...] | None


def _int(text: str, axis: str) -> int:
    if not _INT.match(text):
        raise PlanError(f"{axis} selector: {text[:40]!r} is not an index; write indices, ranges "
                        "a:b, negatives, last or all, e.g. 0,5 or 3:6 or -1")
    return int(text)


def parse_selector(text: str, axis: str = "positions") -> Selector:
    """``"0,5"``, ``"3:6"``, ``"-1"``, ``"last"``, ``"all"`` -> a selector (``None``: all)."""
    if not isinstance(text, str):
        raise PlanError(f"{axis} selector must be text such as 0,5 or 3:6, got {type(text).__name__}")
    if len(text) > _MAX_TEXT:
        raise PlanError(f"{axis} selector is {len(text)} characters long; use ranges a:b instead")
    t = text.strip().lower()
    if t == "all":
        return None
    if not t:
        raise PlanError(f"{axis} selector is empty; write indices, a:b, last or all")
    pieces = t.split(",")
    if len(pieces) > MAX_ITEMS:
        raise PlanError(f"{axis} selector lists {len(pieces)} items (at most {MAX_ITEMS}); "
                        "use ranges a:b instead")
    items: list[Item] = []
    for piece in pieces:
        p = piece.strip()
        if p == "last":
            items.append(-1)
        elif p == "gen":
            if axis != "positions":
                raise PlanError(f"{axis} selector: gen (the generated tokens) is for @pos= only")
            items.append(GEN)
        elif ":" in p:
            a, _, b = p.partition(":")
            if ":" in b:
                raise PlanError(f"{axis} selector: {p[:40]!r} has a step; write a:b")
            items.append(Span(_int(a.strip(), axis) if a.strip() else None,
                              _int(b.strip(), axis) if b.strip() else None))
        else:
            items.append(_int(p, axis))
    return tuple(dict.fromkeys(items))


def _item(v: Any, axis: str) -> Item:
    if isinstance(v, bool):
        raise PlanError(f"{axis} selector: {v!r} is not an index")
    if isinstance(v, int):
        return v
    if isinstance(v, Span):
        return v
    if isinstance(v, Generated):
        if axis != "positions":
            raise PlanError(f"{axis} selector: gen (the generated tokens) is for @pos= only")
        return v
    if isinstance(v, (slice, range)):
        if v.step not in (None, 1):
            raise PlanError(f"{axis} selector: ranges take no step, got {v!r}")
        return Span(v.start, v.stop)
    if isinstance(v, str):
        sel = parse_selector(v, axis)
        if sel is None or len(sel) != 1:
            raise PlanError(f"{axis} selector: {v!r} is not one index or range")
        return sel[0]
    raise PlanError(f"{axis} selector: {v!r} is not an index or range")


def normalise(value: Any, axis: str) -> Selector:
    """Any way of writing a selector (``None``, ``"all"``, text, an int, a slice/range, a
    list of those) -> the canonical tuple (``None``: the whole axis)."""
    if value is None:
        return None
    if isinstance(value, str):
        return parse_selector(value, axis)
    if isinstance(value, (int, slice, range, Span, Generated)) and not isinstance(value, bool):
        return (_item(value, axis),)
    if isinstance(value, Iterable):
        items = []
        for i, v in enumerate(value):
            if i >= MAX_ITEMS:
                raise PlanError(f"{axis} selector lists more than {MAX_ITEMS} items; use ranges")
            items.append(_item(v, axis))
        if not items:
            raise PlanError(f"{axis} selector is empty; give indices, a range, or None for all")
        return tuple(dict.fromkeys(items))
    raise PlanError(f"{axis} selector: {value!r} is not indices, a range or None")


def selector_text(sel: Selector) -> str:
    """The text form of a selector (``"all"`` for ``None``)."""
    if sel is None:
        return "all"
    return ",".join(str(i) for i in sel)


def resolve(sel: Selector, n: int, axis: str, where: str = "") -> list[int] | None:
    """The sorted indices ``sel`` picks on an axis of length ``n`` (``None``: all of it;
    ``gen`` picks none here: see :func:`hookscope.core.plan.aim.prompt_positions`).

    A single index outside the axis is an error; a range is clipped like a slice
    (never expanded past ``n``), but one that picks nothing is an error too."""
    if sel is None:
        return None
    picked: set[int] = set()
    for item in sel:
        if isinstance(item, Generated):
            continue  # a single run (or a source) has no generated tokens: it picks none
        if isinstance(item, Span):
            picked.update(range(n)[slice(item.start, item.stop)])
        else:
            if not -n <= item < n:
                raise PlanError(f"{axis} {item} is out of range{where}: it has {n} "
                                f"{axis} (0..{n - 1}, or -{n}..-1 from the end)")
            picked.add(item % n)
    if not picked:
        if GEN in sel:
            return []
        raise PlanError(f"{axis} {selector_text(sel)} picks nothing{where}: it has {n} {axis}")
    return sorted(picked)


@dataclass(frozen=True)
class At:
    """Where inside a layer's output an intervention acts (every field ``None``: everywhere).

    ``positions``: along the sequence axis of (batch, sequence, features) outputs
    (counted in each run on its own: ``-1`` is the target's last token and the
    source's last token). ``heads``: attention heads, acted on at the input of the
    attention's output projection (see :mod:`hookscope.core.plan.heads`). ``units``: the
    feature axis (channels for convolution outputs; within each head with ``heads``).
    """

    positions: Any = None
    heads: Any = None
    units: Any = None

    def __post_init__(self) -> None:
        for name in ("positions", "heads", "units"):
            object.__setattr__(self, name, normalise(getattr(self, name), name))

    def everywhere(self) -> bool:
        """Whether this selects the whole output (no axis narrowed)."""
        return self.positions is None and self.heads is None and self.units is None

    def suffix(self) -> str:
        """The CLI's text form, e.g. ``@pos=-1@heads=0,5`` (empty when everywhere)."""
        return "".join(f"@{short}={selector_text(getattr(self, name))}"
                       for short, name in AXES.items() if getattr(self, name) is not None)

    def words(self) -> str:
        """Short words for a description, e.g. ``pos -1, heads 0,5``."""
        return ", ".join(f"{short} {selector_text(getattr(self, name))}"
                         for short, name in AXES.items() if getattr(self, name) is not None)

    def to_dict(self) -> dict[str, str]:
        """``{"positions": "-1", ...}``: the text of each narrowed axis (JSON-ready)."""
        return {name: selector_text(getattr(self, name)) for name in AXES.values()
                if getattr(self, name) is not None}

    @classmethod
    def from_dict(cls, data: Any) -> "At":
        """The :class:`At` :meth:`to_dict` wrote."""
        if not isinstance(data, dict):
            raise PlanError(f"'at' must be an object such as {{\"positions\": \"-1\"}}, got "
                            f"{type(data).__name__}")
        unknown = set(data) - set(AXES.values())
        if unknown:
            raise PlanError(f"'at' has unknown key(s) {sorted(map(str, unknown))[:5]}; it takes "
                            "positions, heads, units")
        for k, v in data.items():
            if not isinstance(v, (str, int, list)) or isinstance(v, bool):
                raise PlanError(f"'at' {k} must be text such as \"0,5\" or \"3:6\", got {v!r:.60}")
        return cls(**data)

    @classmethod
    def parse_suffix(cls, text: str) -> "At":
        """``"@pos=-1@heads=0,5"`` (the part after the kind) -> an :class:`At`."""
        values: dict[str, Selector] = {}
        for part in text.split("@")[1:]:
            key, eq, sel = part.partition("=")
            key = key.strip().lower()
            if not eq or key not in AXES:
                raise PlanError(f"cannot read {('@' + part)[:40]!r}: write @pos=SEL, @heads=SEL "
                                "or @units=SEL (SEL: 0,5 or 3:6 or -1 or last or all)")
            if AXES[key] in values:
                raise PlanError(f"@{key}= is given twice; give each of pos, heads, units once")
            values[AXES[key]] = parse_selector(sel, AXES[key])
        return cls(**values)


def split_suffix(text: str) -> tuple[str, At | None]:
    """``"scale:0@pos=3:6"`` -> ``("scale:0", At(positions=3:6))``; no ``@``: ``(text, None)``.

    The suffix starts at the first ``@pos=``/``@heads=``/``@units=`` (case-insensitive),
    so an input spec in the arguments may hold other ``@`` signs."""
    m = re.search(r"@\s*(pos|heads|units)\s*=", text, flags=re.IGNORECASE)
    if m is None:
        if re.search(r"@\s*\w+\s*=", text) and text.count("@") and "text:" not in text \
                and "/" not in text:
            i = text.index("@")
            raise PlanError(f"cannot read {text[i:i + 40]!r}: the suffixes are @pos=SEL, "
                            "@heads=SEL and @units=SEL")
        return text, None
    got = At.parse_suffix(text[m.start():])
    return text[:m.start()], (None if got.everywhere() else got)
