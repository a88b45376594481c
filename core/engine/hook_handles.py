"""The hooks of one run, registered through torch's public API and removed together.

:class:`HandleStack` registers each hook with ``register_forward_hook`` /
``register_forward_pre_hook`` and keeps its ``RemovableHandle`` on a
``contextlib.ExitStack``: :meth:`HandleStack.remove` removes every hook it
added, newest first, even when removing one of them raises (the others are
still removed, then the error propagates), and a failure half-way through
arming is rolled back by the same call. :class:`Arming` is what a
:class:`~.hooks.HookSession` needs of it; ``hookscope.core.fast`` has a
cheaper one.
"""

from __future__ import annotations

import contextlib
from typing import Any, Callable, Protocol

import torch
from torch import nn

from ..base.errors import PlanError


class Handle(Protocol):
    def remove(self) -> None: ...


class Arming(Protocol):
    """Forward hooks and pre-hooks on many modules, removed together by :meth:`remove`."""

    def add(self, module: nn.Module, hook: Callable[[nn.Module, Any, Any], Any]) -> None: ...
    def add_pre(self, module: nn.Module, hook: Callable[[nn.Module, Any], Any]) -> None: ...
    def keep(self, handle: Handle) -> None: ...
    def remove(self) -> None: ...
    def __len__(self) -> int: ...


class HandleStack:
    """:class:`Arming` through ``register_forward_hook`` and its ``RemovableHandle``."""

    __slots__ = ("_stack", "_count")

    def __init__(self) -> None:
        self._stack = contextlib.ExitStack()
        self._count = 0

    def add(self, module: nn.Module, hook: Callable[[nn.Module, Any, Any], Any]) -> None:
        """``module.register_forward_hook(hook)``, removed with the others."""
        self.keep(module.register_forward_hook(hook))

    def add_pre(self, module: nn.Module, hook: Callable[[nn.Module, Any], Any]) -> None:
        """``module.register_forward_pre_hook(hook)``, removed with the others."""
        self.keep(module.register_forward_pre_hook(hook))

    def keep(self, handle: Handle) -> None:
        """Remove ``handle`` with the others (a hook registered some other way)."""
        self._stack.callback(handle.remove)
        self._count += 1

    def __len__(self) -> int:
        return self._count

    def remove(self) -> None:
        """Remove every hook added here, newest first; safe to call twice."""
        self._count = 0
        self._stack.close()


class InputHook:
    """A forward hook ``hook(module, args, value)`` run as a forward pre-hook on the module's
    first positional input (a ``PATH:input`` layer): it sees that input as the value, and
    what it returns (``None``: unchanged) replaces it. A call with no positional input
    (keywords only) is refused: there is nothing the path names."""

    __slots__ = ("hook", "path")

    def __init__(self, hook: Callable[[nn.Module, Any, Any], Any], path: str = "") -> None:
        self.hook = hook
        self.path = path

    def __call__(self, module: nn.Module, args: Any) -> Any:
        if not args:
            raise PlanError(f"layer {self.path!r}: the module was called with keyword inputs "
                            "only, so it has no first positional input to aim at; aim at the "
                            "module whose output feeds it")
        new = self.hook(module, args, args[0])
        return None if new is None else (new, *args[1:])


class MidHooks:
    """``resid_mid`` through an attention module (core/plan/residual_points.py): ``block``
    is a forward pre-hook on the block keeping its input, ``attention`` a forward hook on
    the attention module calling ``hook(module, args, resid_mid)`` with
    ``resid_mid = block input + attention output`` (its first tensor) and adding what the
    hook returns, minus ``resid_mid``, to that output."""

    __slots__ = ("hook", "path", "pre")

    def __init__(self, hook: Callable[[nn.Module, Any, Any], Any], path: str = "") -> None:
        self.hook = hook
        self.path = path
        self.pre: Any = None

    def block(self, module: nn.Module, args: Any) -> None:
        if not args or not isinstance(args[0], torch.Tensor):
            raise PlanError(f"layer {self.path!r}: the block was not called with the residual "
                            "stream as its first positional input")
        self.pre = args[0]

    def attention(self, module: nn.Module, args: Any, output: Any) -> Any:
        first = output[0] if isinstance(output, (tuple, list)) else output
        if self.pre is None or not isinstance(first, torch.Tensor) or first.shape != self.pre.shape:
            raise PlanError(f"layer {self.path!r}: the attention's output is not shaped as the "
                            "block's input, so resid_mid cannot be reached through it")
        mid = self.pre + first
        new = self.hook(module, args, mid)
        if new is None or new is mid:
            return None
        changed = first + (new - mid)
        if isinstance(output, tuple):
            return (changed, *output[1:])
        if isinstance(output, list):
            return [changed, *output[1:]]
        return changed


def add_layer_hook(arming: Arming, lp: Any, hook: Callable[[nn.Module, Any, Any], Any]) -> None:
    """``hook`` on the value ``lp`` names: its module's output, its first input
    (:class:`InputHook`) for a ``PATH:input`` layer, or ``resid_mid`` (:class:`MidHooks`)."""
    if lp.mid_block is not None:
        mid = MidHooks(hook, lp.path)
        arming.add_pre(lp.mid_block, mid.block)
        arming.add(lp.module, mid.attention)
        return
    if lp.at_input:
        arming.add_pre(lp.module, InputHook(hook, lp.path))
    else:
        arming.add(lp.module, hook)


def register_layer_hook(lp: Any, hook: Callable[[nn.Module, Any, Any], Any]) -> Handle:
    """:func:`add_layer_hook` for one hook, returning one handle that removes all it added."""
    stack = HandleStack()
    try:
        add_layer_hook(stack, lp, hook)
    except BaseException:
        stack.remove()
        raise
    return stack
