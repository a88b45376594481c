"""Learning which captures a later in-place op overwrites, in the same forward.

A kept capture is a reference to the layer's output, not a copy. When a later
op writes into that memory (``ReLU(inplace=True)``, ``out += identity``), the
capture would show the overwritten values. Copying every capture is correct
but costs a pass over every activation; copying none is wrong.

On a model's first run the forward runs under :class:`InplaceGuard`, a
``TorchDispatchMode`` that sees every ATen op before it runs. For an op that
writes into one of its arguments (its schema marks the argument as written:
``relu_``, ``add_``, ``copy_``, ``out=``), it checks whether that argument's
memory is the memory of a kept capture, and if so copies the capture *before*
the op overwrites it. Only the captures at risk are copied, and only once; the
layers found are remembered by the caller, whose later runs copy them at
capture time and run without the guard (no per-op cost).

The guard sees writes through ``.data`` and views too (they are ATen ops on
the same storage); anything that writes without an ATen op (a NumPy view of
the tensor) is caught afterwards by the version counter check in
:meth:`HookSession.stale_paths`, which falls back to a second forward, as the
reference path always does. The guard's worth is that second forward: on a
model with in-place ops the reference path's first run costs two forwards.
"""

from __future__ import annotations

import sys
from contextlib import contextmanager
from typing import Any, ContextManager, Iterator

import torch
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode

from ..engine.hooks import LayerHook, version_of
from .guard_pauses import GuardPauses
from .session import FastPending, FastSession
from .victim_remake import Where

# Per ATen overload: positions and names of the arguments it writes into (cached).
_WRITES: dict[Any, tuple[tuple[int, str], ...]] = {}


def _written_args(func: Any) -> tuple[tuple[int, str], ...]:
    got = _WRITES.get(func)
    if got is None:
        got = tuple((i, a.name) for i, a in enumerate(func._schema.arguments)
                    if a.alias_info is not None and a.alias_info.is_write)
        _WRITES[func] = got
    return got


def _storage_key(t: torch.Tensor) -> int | None:
    try:
        return t.untyped_storage().data_ptr()
    except (RuntimeError, NotImplementedError):  # no storage (sparse, some subclasses)
        return None


class InplaceGuard(TorchDispatchMode):
    """Copies a kept capture just before an op writes into its memory.

    ``watch(rec, slot)`` registers ``rec.<slot>`` (``"kept"`` or ``"pre_kept"``,
    a ``(tensor, version)`` pair of a pending capture) under its storage.
    ``victims`` collects the paths whose captures had to be copied.
    """

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        # By default torch wraps every mode's __torch_dispatch__ in torch._disable_dynamo,
        # which costs ~8 µs an op here (a ResNet-50 forward runs ~390 ops: 3 ms of a
        # 125 ms first run). This one only reads a dict and calls the op; nothing in it
        # is for torch.compile to trace.
        return False

    def __init__(self) -> None:
        super().__init__()
        self._watched: dict[int, list[tuple[Any, str]]] = {}
        self.victims: set[str] = set()

    def watch(self, rec: Any, slot: str) -> None:
        kept = getattr(rec, slot)
        if kept is None:
            return
        key = _storage_key(kept[0])
        if key is not None and key != 0:
            self._watched.setdefault(key, []).append((rec, slot))

    def __exit__(self, *exc: Any) -> Any:
        # Nothing is watched past the forward: the captures belong to the result.
        self._watched.clear()
        return super().__exit__(*exc)

    def _rescue(self, t: Any) -> None:
        if not isinstance(t, torch.Tensor):
            return
        key = _storage_key(t)
        recs = self._watched.pop(key, None) if key is not None else None
        for rec, slot in recs or ():
            if slot == "kept" and rec.remake is not None:
                rec.kept = None  # computed again from its input when read: no copy
            else:
                tensor, _ = getattr(rec, slot)
                setattr(rec, slot, (tensor.clone(), None))  # a copy has no version to check
            if slot == "kept":
                rec.copied = True
            self.victims.add(rec.path)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if self._watched:
            for i, name in _written_args(func):
                t = args[i] if i < len(args) else kwargs.get(name)
                if isinstance(t, (list, tuple)):  # e.g. _foreach_add_, out=(a, b)
                    for x in t:
                        self._rescue(x)
                else:
                    self._rescue(t)
        return func(*args, **kwargs)


class _InputHook(LayerHook):
    """A first run's hook of a BatchNorm whose capture can be remade: it keeps the
    layer's input for :meth:`GuardedSession._record` (see victim_remake.py)."""

    __slots__ = ("dtype", "where", "last_input")

    def __init__(self, session: Any, lp: Any, at: tuple[torch.dtype, Where]):
        super().__init__(session, lp, clone=False)
        self.dtype, self.where = at  # its copied statistics (see NormStore.add)
        self.last_input: Any = None

    def __call__(self, module: nn.Module, args: Any, output: Any) -> Any:
        self.last_input = args[0] if len(args) == 1 else None
        return super().__call__(module, args, output)


class GuardedSession(FastSession):
    """A :class:`FastSession` whose kept captures are watched by an :class:`InplaceGuard`
    while the forward runs inside :meth:`watching`; :meth:`learned` puts the layers a
    later in-place op overwrote into the model's memory.
    """

    learning = True

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.guard = InplaceGuard()
        self._raw_keep = False  # the guard watches and replaces a PendingCapture's kept slot

    def watching(self, module: nn.Module, modules: list[nn.Module] | None) -> ContextManager[Any]:
        # The forward runs under the guard, which steps off the dispatch stack inside
        # layers that only read their input (guard_pauses.py). Without the pauses every
        # convolution and norm goes through Python: a first every-leaf run on ResNet-50
        # b1 read 1.38-1.43 of a plain forward, with them 1.27 (same machine, same day).
        return _guarded(self.guard, GuardPauses(module, self.guard, modules))

    def learned(self, memory: Any) -> None:
        super().learned(memory)
        memory.victims |= self.guard.victims
        memory.watched |= set(self.layers)

    def _hook_for(self, path: str, lp: Any) -> LayerHook:
        """A captured BatchNorm whose capture can be computed again from its input
        (victim_remake.py) gets a hook that hands that input over: if an in-place
        op is about to overwrite the capture, the guard drops it instead of copying it.
        Not in a comparison (a baseline to join): those are copied, as in later runs."""
        at = None if self.baseline or path in self.clone_paths else self._remake_at(path, lp)
        return _InputHook(self, lp, at) if at is not None else super()._hook_for(path, lp)

    def _record(self, hook: Any, call: int, pre: Any, post: Any) -> None:
        if pre is None and type(post) is torch.Tensor and self._plain_keep:
            # A bare output kept, no intervention, no baseline (every layer of an every-leaf
            # first run): the PendingCapture made directly, without the general leaf walk.
            last = FastPending.of_kept(hook.path, call, *self._keep(post, hook.clone), hook.clone)
            self._pending.append(last)
        else:
            super()._record(hook, call, pre, post)
            last = self._pending[-1]
            assert type(last) is FastPending  # raw entries are statistics-only: nothing kept
        if type(hook) is _InputHook:
            x, hook.last_input = hook.last_input, None
            if (pre is None and type(post) is torch.Tensor and type(x) is torch.Tensor
                    and x.dtype is post.dtype):
                v = version_of(x)
                if v is not None:
                    last.remake = (hook, x.detach() if x.requires_grad else x, v)
        for rec in (last, *last.extra):  # every tensor leaf
            for slot in ("kept", "pre_kept"):
                kept = getattr(rec, slot)
                if kept is not None and kept[1] is not None:  # not already a copy
                    self.guard.watch(rec, slot)


@contextmanager
def _guarded(guard: InplaceGuard, pauses: GuardPauses) -> Iterator[None]:
    """The guard on the dispatch stack, paused inside read-only layers; both undone on
    every path (the pauses' hooks first, then the guard)."""
    with guard, pauses:
        yield


# The first dispatch mode of a process imports torch._dynamo (about 2 s here), which
# is more than the second forward the version-counter fallback costs on a small
# model. So small models learn their victims the old way (a second forward only when
# a capture was overwritten), and the guard is used once torch._dynamo is loaded
# anyway or the model is big enough that a forward costs more than that import.
GUARD_FROM_PARAMS = 5_000_000


def worth_guarding(module: torch.nn.Module, memory: Any) -> bool:
    """Whether learning this model's in-place victims under the guard is cheaper than a
    possible second forward (remembered in ``memory.guard_worth``)."""
    if "torch._dynamo" in sys.modules:
        return True
    if memory.guard_worth is None:
        total = 0
        for p in module.parameters():  # stops at the threshold: a model's first run pays this
            total += p.numel()
            if total >= GUARD_FROM_PARAMS:
                break
        memory.guard_worth = total >= GUARD_FROM_PARAMS
    return memory.guard_worth
