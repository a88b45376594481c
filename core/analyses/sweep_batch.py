"""Batched sweep cells: several cells in one forward, one cell per row of the batch.

A batch-size-1 input is repeated ``k`` times along dim 0; row ``r`` carries cell ``r``'s
interventions. Every hooked module gets one hook that, for each row with an intervention
there, hands that intervention the row's slice of the output (a batch of one, exactly what
the cell's own :func:`~.run.compare` would hand it, with the same source and call number),
and writes the changed slice back into a copy of the output. Rows without an intervention at
a module pass through it unchanged. Each row's model output is then the cell's intervened
output, up to the last bits a batched matrix product may round differently.

This holds only where rows do not meet: a model in train mode (dropout, batch statistics)
or one whose kernels follow its hooks is never batched (:func:`why_not_batched`), and every
first batch carries one clean row (no intervention) that must equal the shared baseline, so
a model that mixes rows is found on its first batch and the sweep goes on unbatched. A leaf
a hook sees must be (k, ...) where the baseline's was (1, ...), the same for the output;
otherwise :class:`NotRowwise` stops batching the same way.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from ..base.errors import HookscopeError
from ..base.nested import map_tensors, map_tensors_keyed, tensor_leaves
from ..plan.intervention_base import Intervention, InterventionContext
from ..plan.plan import LayerPlan
from ..engine.hook_handles import HandleStack
from ..engine.receipts import Tally

#: Rows one batched forward holds at most, unless the caller says otherwise.
DEFAULT_MAX_ROWS = 32
#: The memory a batch's rows may take, as estimated by :func:`rows_for_budget`.
DEFAULT_BATCH_BYTES = 512 << 20


class NotRowwise(HookscopeError):
    """This forward cannot stand for its cells row by row; the message says why. (A
    HookscopeError, so a hook raising it inside the forward is not wrapped as the model's
    own error.)"""


@dataclass
class RowWork:
    """One row's intervention at one module: its row, layer path, source outputs per call
    (or ``None``) and the receipt counts of that cell's layer."""

    row: int
    path: str
    intervention: Intervention
    sources: list[Any] | None
    tally: Tally
    n_heads: int | None = None


def input_rows(x: Any) -> str | None:
    """Why ``x`` cannot be repeated along dim 0 (``None``: every tensor leaf is (1, ...))."""
    leaves = tensor_leaves(x)
    if not leaves:
        return "the input holds no tensor to repeat along the batch dimension"
    for key, t in leaves:
        if t.dim() == 0 or t.shape[0] != 1:
            shape = tuple(t.shape)
            return (f"the input{' ' + key if key else ''} is {shape}, not a batch of one "
                    "(cells are batched by repeating a batch of one)")
    return None


def output_rows(out: Any) -> str | None:
    """Why the model's output on one input cannot be told apart by rows of a batch
    (``None``: every tensor leaf is (1, ...))."""
    for key, t in tensor_leaves(out):
        if t.dim() == 0 or t.shape[0] != 1:
            return (f"the model's output{key} is {tuple(t.shape)} on one input, not (1, ...): "
                    "not batched along dim 0")
    return None


def why_not_batched(module: nn.Module, x: Any, sensitive: bool) -> str | None:
    """Why this model and input take no batched cells at all, in words (``None``: they can)."""
    if sensitive:
        return ("the model has layers that choose their kernels by which modules carry hooks "
                "(nn.TransformerEncoderLayer, nn.MultiheadAttention), so each cell runs alone "
                "with its own hooks")
    if any(m.training for m in module.modules()):
        return ("the model is in train mode: dropout and batch statistics would differ between "
                "a batch and a single run")
    return input_rows(x)


def repeat_rows(x: Any, k: int) -> Any:
    """``x`` (every tensor leaf (1, ...)) repeated to ``k`` rows, as fresh tensors."""
    return map_tensors(lambda t: t.expand(k, *t.shape[1:]).contiguous(), x)


def stack_rows(xs: list[Any]) -> Any:
    """Inputs of one layout, each a batch of one, as one batch (row ``i``: ``xs[i]``)."""
    leaves = [dict(tensor_leaves(x)) for x in xs]
    return map_tensors_keyed(lambda t, key: torch.cat([lv[key] for lv in leaves], dim=0), xs[0])


def rows_for_budget(row_bytes: int, max_rows: int, budget: int) -> int:
    """How many rows a batch takes: at most ``max_rows``, and what ``budget`` bytes hold at
    ``row_bytes`` a row (at least 1)."""
    by_memory = budget // max(1, row_bytes)
    return max(1, min(max_rows, by_memory))


def leaf_bytes(value: Any) -> int:
    return sum(t.numel() * t.element_size() for _, t in tensor_leaves(value))


class _RowHook:
    """The hook of one module in a batched forward: each row's intervention on its own
    slice of the output (or, at a head site, of the output projection's input)."""

    def __init__(self, path: str, module: nn.Module, target: nn.Module, rows: int,
                 works: list[RowWork], alone: list[dict[str, tuple[int, ...]]]):
        self.path = path
        self.module = module
        self.target = target  # the module hooked: the layer, or its output projection
        self.rows = rows
        self.works = works
        self.alone = alone  # the leaves' shapes per call in the baseline (one input)
        self.calls = 0

    def apply(self, value: Any) -> Any:
        call = self.calls
        self.calls += 1
        k = self.rows
        new_rows: dict[int, dict[str, torch.Tensor]] = {}
        if call >= len(self.alone):
            raise NotRowwise(f"layer {self.path!r} runs more often on a batch than on one input")
        alone = self.alone[call]
        batched: set[str] = set()
        for key, t in tensor_leaves(value):  # (1, ...) alone and (k, ...) here: a row each
            one = alone.get(key)
            if one is not None and one[:1] == (1,) and tuple(t.shape) == (k, *one[1:]):
                batched.add(key)

        def row_of(r: int) -> Any:
            return map_tensors_keyed(lambda t, key: t[r:r + 1] if key in batched else t, value)

        for w in self.works:
            part = row_of(w.row)
            src = w.sources[call] if w.sources is not None and call < len(w.sources) else None
            ctx = InterventionContext(w.path, call, self.module, src, n_heads=w.n_heads)
            new = w.intervention.apply(part, ctx)
            w.tally.add(part, new)
            before = dict(tensor_leaves(part))
            got: dict[str, torch.Tensor] = {}
            for key, t in tensor_leaves(new):
                if before.get(key) is t:
                    continue  # unchanged leaf
                if key not in batched:
                    raise NotRowwise(f"layer {w.path!r}: {w.intervention.name} changes its "
                                     f"output{key}, which is not batched along dim 0")
                got[key] = t
            new_rows.setdefault(w.row, {}).update(got)
        if not new_rows:
            return None
        changed = {key for got in new_rows.values() for key in got}

        def merged(t: torch.Tensor, key: str) -> torch.Tensor:
            if key not in changed:
                return t
            out = t.clone()
            for r, got in new_rows.items():
                if key in got:
                    out[r:r + 1] = got[key]
            return out

        return map_tensors_keyed(merged, value)

    def __call__(self, module: nn.Module, args: Any, output: Any) -> Any:
        return self.apply(output)


class _RowPreHook:
    """Heads: the rows' interventions on an output projection's first input."""

    def __init__(self, hook: _RowHook):
        self.hook = hook

    def __call__(self, module: nn.Module, args: Any) -> Any:
        if not args:
            return None
        new = self.hook.apply(args[0])
        return None if new is None else (new, *args[1:])


def row_target(lp: LayerPlan) -> tuple[nn.Module, bool]:
    """Where a row hook of ``lp`` goes: ``(module, True)`` for the pre-hook on a head site's
    output projection or on a ``PATH:input`` layer, ``(module, False)`` for the forward hook
    on the layer itself."""
    if lp.at_input:
        return lp.module, True
    site = lp.head_site
    if site is not None and site.projection is not None:
        return site.projection, True
    return lp.module, False


@dataclass
class RowHooks:
    """Every row hook of one batched forward, added on enter and removed on exit.
    ``alone``: each hooked module's leaf shapes per call on one input (the baseline's), by
    ``(id(module), at a projection)``."""

    rows: int
    alone: dict[tuple[int, bool], list[dict[str, tuple[int, ...]]]]
    by_module: dict[tuple[int, bool], _RowHook] = field(default_factory=dict)
    _handles: HandleStack = field(default_factory=HandleStack)

    def add(self, lp: LayerPlan, work: RowWork) -> None:
        target, at_projection = row_target(lp)
        key = (id(target), at_projection)
        hook = self.by_module.get(key)
        if hook is None:
            hook = self.by_module[key] = _RowHook(lp.path, lp.module, target, self.rows, [],
                                                  self.alone.get(key, []))
        hook.works.append(work)

    def __enter__(self) -> "RowHooks":
        try:
            for (_, at_projection), hook in self.by_module.items():
                if at_projection:
                    self._handles.add_pre(hook.target, _RowPreHook(hook))
                else:
                    self._handles.add(hook.module, hook)
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self._handles.remove()


def row_outputs(out: Any, base: Any, k: int) -> list[Any]:
    """The ``k`` rows of a batched model output, each shaped as the baseline's ``base``;
    :class:`NotRowwise` if the output is not ``base`` repeated along dim 0."""
    got = tensor_leaves(out)
    want = tensor_leaves(base)
    if [key for key, _ in got] != [key for key, _ in want]:
        raise NotRowwise("the model's output on a batch is laid out differently from its "
                         "output on one input (not batched along dim 0)")
    for (key, t), (_, b) in zip(got, want):
        if b.dim() == 0 or b.shape[0] != 1 or tuple(t.shape) != (k, *b.shape[1:]):
            raise NotRowwise(f"the model's output{key} is {tuple(t.shape)} on a batch of {k} "
                             f"but {tuple(b.shape)} on one input (not batched along dim 0)")
    host = map_tensors(lambda t: t.detach().cpu(), out)
    return [_row(host, r) for r in range(k)]


def _row(value: Any, r: int) -> Any:
    """Row ``r`` of every tensor leaf of ``value`` (a batch of one, a view)."""
    return map_tensors(lambda t: t[r:r + 1], value)


def rows_match(row: Any, base: Any) -> bool:
    """Whether a clean row equals the baseline's output to float rounding (a batched
    matrix product may round the last bits differently, nothing more)."""
    for (_, a), (_, b) in zip(tensor_leaves(row), tensor_leaves(base)):
        if a.shape != b.shape or a.dtype != b.dtype:
            return False
        if not a.is_floating_point():
            if not torch.equal(a, b):
                return False
            continue
        a64, b64 = a.double(), b.double()
        finite = torch.isfinite(b64)
        if not torch.equal(finite, torch.isfinite(a64)):
            return False
        if not torch.equal(a64[~finite].nan_to_num(), b64[~finite].nan_to_num()):
            return False
        scale = float(b64[finite].abs().max()) if finite.any() else 0.0
        eps = torch.finfo(a.dtype).eps
        if finite.any() and float((a64[finite] - b64[finite]).abs().max()) > 64 * eps * (1 + scale):
            return False
    return True

