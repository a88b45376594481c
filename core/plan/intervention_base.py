"""The base of every intervention kind: context, parsing, saving, export.

:class:`Intervention` gives each kind (a frozen dataclass in
:mod:`hookscope.core.plan.interventions`) everything that is not its arithmetic:
walking nested outputs, :meth:`~Intervention.describe`, :meth:`~Intervention.to_dict`
and :meth:`~Intervention.from_dict`, :meth:`~Intervention.parse` for the CLI's
``KIND:ARGS``, :meth:`~Intervention.to_torch_source` for the exported script.
The parameter metadata that generated editors and parsers read, and how a
parameter's value is converted, are in :mod:`.param_values`.
"""

from __future__ import annotations

import dataclasses
import inspect
import textwrap
from dataclasses import dataclass
from typing import Any, Callable, ClassVar

import torch
from torch import nn

from .at import At, Generated, split_suffix
from .param_values import (Param, convert_value, input_key, jsonable, py_literal,
                           short_value, value_from_text)
from ..base.errors import PlanError
from ..base.nested import map_tensors_keyed, tensor_leaves
from .aim import aimed, fits
from .at import Span

#: The registry's reader of a saved intervention (:func:`.intervention_registry.from_dict`),
#: handed over by the registry when it loads: the base cannot import the registry,
#: which imports the kinds built on the base.
_registry_from_dict: "Callable[[Any], Intervention] | None" = None


def use_registry(from_dict: "Callable[[Any], Intervention]") -> None:
    """Called once by the registry: :meth:`Intervention.from_dict` reads through it."""
    global _registry_from_dict
    _registry_from_dict = from_dict


@dataclass(frozen=True)
class InterventionContext:
    """Where an intervention is applied: which layer, which call of it.

    ``source`` is this layer's output for the same call in the pre-pass on the
    kind's :meth:`~Intervention.pre_pass_input` (nested like the output);
    ``source_leaf`` is the matching tensor for the leaf being changed.
    """

    path: str = ""
    call: int = 0
    module: nn.Module | None = None
    source: Any = None
    source_leaf: torch.Tensor | None = None
    #: At a head site (the input of an attention's output projection): its number of heads.
    n_heads: int | None = None


def numeric(t: torch.Tensor) -> bool:
    """Tensors an arithmetic intervention changes: not bool, not complex."""
    return t.dtype != torch.bool and not t.is_complex()


def _aimed_describe(own: Any) -> Any:
    """A kind's own ``describe`` with the ``at`` suffix added (``scale(0.5) @pos=-1``)."""
    def describe(self: "Intervention") -> str:
        return with_at_words(own(self), self.where())
    describe.__doc__ = own.__doc__
    describe._adds_at = True  # type: ignore[attr-defined]
    return describe


def with_at_words(text: str, at: At | None) -> str:
    return text if at is None else f"{text} {at.suffix()}"


@dataclass(frozen=True)
class Intervention:
    """Base of every kind. Subclasses are frozen dataclasses; see the module docstring.

    ``at`` (keyword only, every kind): where inside the output it acts (:class:`At`);
    ``None``: the whole output.
    """

    at: At | None = dataclasses.field(default=None, kw_only=True, compare=True)

    name: ClassVar[str] = "intervention"
    #: The parameters Live mode drags (clamp: both bounds; ``()``: nothing to drag).
    draggable: ClassVar[tuple[str, ...]] = ()
    #: The change to one tensor leaf in plain torch, ``<name>_leaf(t, module, source,
    #: **params)`` (no Hookscope imports, see :mod:`.leaf_functions`): :meth:`apply_tensor`
    #: calls it and the exported script copies its source (:meth:`leaf_definitions`). A
    #: kind whose function has no source file may give that source as text instead.
    leaf_function: ClassVar[Callable[..., torch.Tensor] | str | None] = None
    #: Plain-torch functions the leaf function calls, copied into the script before it.
    leaf_helpers: ClassVar[tuple[Callable[..., Any], ...]] = ()
    #: One line for error messages and ``--help``: how ``parse`` reads ``KIND:ARGS``.
    syntax: ClassVar[str] = ""
    #: Which tensor leaves the kind changes: ``"numeric"`` (not bool/complex), ``"all"``, or
    #: ``"first"`` (the first floating-point leaf only: an SAE edit of a block's residual stream).
    leaf_kinds: ClassVar[str] = "numeric"
    #: Whether a sweep may apply it to one row of a batched forward, handing it that row's
    #: slice (a batch of one, as a single run would); ``False`` for a kind whose change
    #: depends on anything but the values it is given (see core/analyses/sweep_batch.py).
    batch_rows: ClassVar[bool] = True
    #: Whether the change at each token position depends only on that position's values
    #: (and the source's at the same position): then a causal model's cached generation
    #: (core/analyses/generation.py) equals the full loop. ``False`` (an unknown kind's
    #: default) for a kind that mixes positions or whose change depends on the tensor's length.
    per_position: ClassVar[bool] = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        own = cls.__dict__.get("describe")
        if own is not None and not getattr(own, "_adds_at", False):
            cls.describe = _aimed_describe(own)  # type: ignore[method-assign]

    # -- applying ---------------------------------------------------------------
    def where(self) -> At | None:
        """Where this acts (``None``: the whole output); ``at`` given as a dict or a
        ``@pos=..`` suffix is read here."""
        at = self.at
        if at is None or isinstance(at, At):
            return None if at is None or at.everywhere() else at
        got = At.from_dict(at) if isinstance(at, dict) else (
            split_suffix(at if at.startswith("@") else "@" + at)[1] if isinstance(at, str) else None)
        if got is None and not isinstance(at, (dict, str)):
            raise PlanError(f"{self.name}: at must be At(positions=..., heads=..., units=...), "
                            f"got {type(at).__name__}")
        return got if got is not None and not got.everywhere() else None

    def apply(self, value: Any, context: InterventionContext | None = None) -> Any:
        """The changed output; nested structures kept, non-tensor leaves passed through.

        With ``at``, each tensor it fits is narrowed to the selected part, the kind's
        :meth:`apply_tensor` changes that part (beside the same part of the source
        tensor), and the result is written into a copy (:func:`~hookscope.core.plan.aim.aimed`)."""
        ctx = context or InterventionContext()
        src = dict(tensor_leaves(ctx.source)) if ctx.source is not None else {}
        at = self.where()
        if at is None:
            def leaf(t: torch.Tensor, key: str) -> torch.Tensor:
                if not self.applies_to(t):
                    return t
                leaf_ctx = dataclasses.replace(ctx, source_leaf=src.get(key)) if src else ctx
                return self.apply_tensor(t, leaf_ctx)

            return map_tensors_keyed(leaf, value)
        where = f" in layer {ctx.path!r}" if ctx.path else ""
        hit: list[str] = []
        shapes: list[tuple[int, ...]] = []

        def aimed_leaf(t: torch.Tensor, key: str) -> torch.Tensor:
            if not self.applies_to(t):
                return t
            shapes.append(tuple(t.shape))
            if not fits(t, at, ctx.module, ctx.n_heads):
                return t
            hit.append(key)
            s = src.get(key)

            def change(part: torch.Tensor, spart: torch.Tensor | None) -> torch.Tensor:
                return self.apply_tensor(part, dataclasses.replace(ctx, source_leaf=spart))

            if src and s is None:
                return self.apply_tensor(t, ctx)  # the kind says what a missing source means
            return aimed(t, s, at, change, ctx.module, ctx.n_heads, where)

        out = map_tensors_keyed(aimed_leaf, value)
        if not hit:
            raise PlanError(_no_fit_message(self.name, at, shapes, where, ctx.n_heads))
        return out

    def acts_per_position(self) -> bool:
        """Whether this intervention changes each position on its own (see
        :attr:`per_position`; a kind whose answer depends on its values overrides this)."""
        return self.per_position

    def applies_to(self, t: torch.Tensor) -> bool:
        """Whether this kind changes tensor ``t`` (see :attr:`leaf_kinds`)."""
        return self.leaf_kinds == "all" or numeric(t)

    def apply_tensor(self, t: torch.Tensor, ctx: InterventionContext) -> torch.Tensor:
        raise NotImplementedError  # pragma: no cover - every kind defines it

    # -- describing -------------------------------------------------------------
    @property
    def kind(self) -> str:
        """The registry name (older name of :attr:`name`)."""
        return self.name

    @classmethod
    def params(cls) -> tuple[Param, ...]:
        """The kind's parameters, in order (for generated editors and parsers)."""
        out = []
        for f in dataclasses.fields(cls):  # type: ignore[arg-type]
            meta = f.metadata.get("param")
            if meta is not None:
                out.append(Param(name=f.name, **meta))
        return tuple(out)

    def values(self) -> dict[str, Any]:
        """``{parameter: value}`` (``at`` is not a parameter: see :meth:`where`)."""
        return {p.name: getattr(self, p.name) for p in self.params()}

    def describe(self) -> str:
        """Short words for a cell, a plot title or the CLI table, e.g. ``scale(0.5)``."""
        shown = [short_value(v) for v in self.values().values() if v is not None]
        return with_at_words(f"{self.name}({', '.join(shown)})", self.where())

    def bounds(self) -> tuple[float, float] | None:
        """``(lo, hi)`` lines to draw on a histogram (open ends ``±inf``), or ``None``."""
        return None

    def with_value(self, name: str, value: Any) -> "Intervention":
        """A copy with one parameter changed (a drag, an edited cell)."""
        return dataclasses.replace(self, **{name: value})  # type: ignore[type-var]

    # -- sources ----------------------------------------------------------------
    def pre_pass_input(self) -> Any:
        """The input a pre-pass must run on (spec string or tensor), or ``None``."""
        return None

    def source_key(self) -> Any:
        """Equal for interventions that can share one source forward."""
        return input_key(self.pre_pass_input())

    # -- saving and parsing -----------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """JSON-ready ``{"kind": name, param: value, ...}`` (tuples as lists, tensors as literals)."""
        d: dict[str, Any] = {"kind": self.name}
        for k, v in self.values().items():
            d[k] = jsonable(v)
        at = self.where()
        if at is not None:
            d["at"] = at.to_dict()
        return d

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Intervention":
        """The intervention a :meth:`to_dict` wrote (any registered kind)."""
        if _registry_from_dict is None:  # pragma: no cover - import hookscope.core loads it
            raise RuntimeError("the intervention registry is not loaded")
        return _registry_from_dict(data)

    @classmethod
    def from_values(cls, values: dict[str, Any]) -> "Intervention":
        """Build from ``{param: value}`` read from JSON or text: values are converted by type."""
        known = {p.name: p for p in cls.params()}
        values = dict(values)
        at = values.pop("at", None)
        unknown = set(values) - set(known)
        if unknown:
            raise PlanError(f"{cls.name}: unknown parameter(s) {sorted(map(str, unknown))}; "
                            f"it takes {sorted(known) or 'none'}")
        kwargs = {k: convert_value(cls.name, known[k], v) for k, v in values.items()}
        if at is not None:
            kwargs["at"] = at if isinstance(at, At) else At.from_dict(at)
        try:
            return cls(**kwargs)  # type: ignore[call-arg]
        except TypeError as exc:
            raise PlanError(f"{cls.name}: {exc}; write {cls.usage()}") from exc

    @classmethod
    def usage(cls) -> str:
        """How to write this kind on the command line."""
        if cls.syntax:
            return cls.syntax
        parts = [p.name.upper() for p in cls.params()]
        return ":".join([cls.name, *parts]) if parts else cls.name

    @classmethod
    def parse(cls, args: str) -> "Intervention":
        """Read the ``ARGS`` of ``KIND:ARGS``: parameters in order, ``:``-separated; the
        last one takes the rest (so an input spec may hold colons); empty means default.
        A ``text:`` prompt keeps its trailing spaces (they are tokens)."""
        ps = cls.params()
        args = args.lstrip() if args.lstrip().startswith("text:") else args.strip()
        if not ps:
            if args:
                raise PlanError(f"{cls.name} takes no arguments; write {cls.usage()}")
            return cls()
        pieces = args.split(":", len(ps) - 1) if args else []
        values = {}
        for p, text in zip(ps, pieces):
            if text.strip():
                prompt = p.type == "input" and text.lstrip().startswith("text:")
                values[p.name] = value_from_text(cls.name, cls.usage(), p,
                                                 text.lstrip() if prompt else text.strip())
        return cls.from_values(values)

    @classmethod
    def leaf_definitions(cls) -> list[str]:
        """The source of :attr:`leaf_helpers` and :attr:`leaf_function`, in that order, as the
        exported script defines them (``[]``: the kind has no plain-torch form)."""
        out = []
        for fn in (*cls.leaf_helpers, cls.leaf_function):
            if isinstance(fn, str) or fn is None:
                text = fn or ""
            else:
                try:
                    text = inspect.getsource(fn)
                except (OSError, TypeError) as exc:  # defined where no source file is kept
                    raise PlanError(f"the {cls.name} intervention's leaf function "
                                    f"{getattr(fn, '__name__', fn)!r} has no source to export; "
                                    "define it in a .py file") from exc
            if text.strip():
                out.append(textwrap.dedent(text).strip("\n"))
        return out if cls.leaf_function else []

    def leaf_source(self) -> str:
        """The kind's arithmetic as a plain-torch expression: a leaf function and its
        arguments, ``functools.partial(<name>_leaf, ...)``, using :attr:`leaf_function`'s
        definition. A kind whose arguments are not plain literals overrides this."""
        if not self.leaf_function:
            raise PlanError(f"the {self.name} intervention has no plain-torch form to export")
        kwargs = ", ".join(f"{k}={py_literal(v)}" for k, v in self.values().items()
                           if self.params_for_script(k))
        return f"functools.partial({self.leaf_name()}{', ' if kwargs else ''}{kwargs})"

    @classmethod
    def leaf_name(cls) -> str:
        """The name the exported script calls the leaf function by."""
        fn = cls.leaf_function
        return fn.__name__ if callable(fn) else f"{cls.name}_leaf"

    def to_torch_source(self, n_heads: int | None = None) -> str:
        """This intervention as a plain-torch expression (:meth:`leaf_source`); with ``at``,
        wrapped in the script's ``aimed(...)`` (``n_heads``: the layer's heads)."""
        leaf = self.leaf_source()
        at = self.where()
        if at is None:
            return leaf
        if at.positions is not None and any(isinstance(i, Generated) for i in at.positions):
            raise PlanError(f"{self.name}@pos=gen acts on generated tokens; the exported script "
                            "runs one forward, which has none: export without it")
        sel = ", ".join(f"{name}={_sel_literal(getattr(at, name))}"
                        for name in ("positions", "heads", "units"))
        heads = f", n_heads={n_heads}" if at.heads is not None else ""
        return f"aimed({leaf}, {sel}{heads})"

    def params_for_script(self, name: str) -> bool:
        """Whether parameter ``name`` is passed to the leaf function (a source input is not)."""
        return next(p for p in self.params() if p.name == name).type != "input"


# -- helpers for values ------------------------------------------------------------

def _sel_literal(sel: Any) -> str:
    """A selector as the exported script's literal: ``None`` or a list of ints and
    ``(start, stop)`` pairs."""
    if sel is None:
        return "None"
    return repr([(i.start, i.stop) if isinstance(i, Span) else i for i in sel])


def _no_fit_message(kind: str, at: At, shapes: list[tuple[int, ...]], where: str,
                    n_heads: int | None) -> str:
    shown = ", ".join(str(s) for s in shapes[:4]) or "no numeric tensor"
    if at.heads is not None and n_heads is None:
        return (f"{kind} at {at.words()}{where}: heads can only be picked on an attention module "
                "(see the README's heads section)")
    if at.positions is not None:
        return (f"{kind} at {at.words()}{where}: positions need a (batch, sequence, features) "
                f"output, but it gives {shown}; positions of image feature maps or of "
                "(batch, features) vectors are not supported, use @units= for channels")
    return f"{kind} at {at.words()}{where}: no tensor of the output ({shown}) has that axis"

class _SourceEq:
    """Equality and hash by source key (a tensor field cannot compare with ``==``)."""

    def _eq_key(self) -> tuple:
        return (type(self), tuple(input_key(v) if isinstance(v, torch.Tensor) else v
                                  for v in self.values().values()),  # type: ignore[attr-defined]
                self.where())  # type: ignore[attr-defined]

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _SourceEq) and self._eq_key() == other._eq_key()

    def __hash__(self) -> int:
        return hash(self._eq_key())
