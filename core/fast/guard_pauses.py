"""The first run's in-place guard stands aside inside layers that never write in place.

Under a Python dispatch mode every ATen op of the forward goes through Python,
and composite ops reach it decomposed: ``batch_norm`` as ``native_batch_norm``
plus an ``empty``, ``max_pool2d`` as ``max_pool2d_with_indices``. On a
ResNet-50 that made the forward 130 -> 142 ms, most of it inside convolutions,
batch norms and pooling, which cannot overwrite a kept capture: their forward
only reads their input. So for the exact torch classes below, the guard
(:class:`~.inplace_victims.InplaceGuard`) is taken off the dispatch stack
when the layer starts and put back when it ends (an ``always_call`` hook, so
also when it raises). Everything else, ``ReLU(inplace=True)`` and the Python
between layers (``out += identity``) included, still runs under it.

A layer is paused only when the guard is the top of the stack: a mode the
model pushed itself stays untouched.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from .hook_dicts import add_forward_hook, add_forward_pre_hook

#: Layers whose forward reads its input and writes only new tensors.
READ_ONLY: frozenset[type[nn.Module]] = frozenset({
    nn.Conv1d, nn.Conv2d, nn.Conv3d, nn.ConvTranspose1d, nn.ConvTranspose2d, nn.ConvTranspose3d,
    nn.Linear, nn.Bilinear, nn.Embedding,
    nn.BatchNorm1d, nn.BatchNorm2d, nn.BatchNorm3d, nn.LayerNorm, nn.GroupNorm,
    nn.MaxPool1d, nn.MaxPool2d, nn.MaxPool3d, nn.AvgPool1d, nn.AvgPool2d, nn.AvgPool3d,
    nn.AdaptiveAvgPool1d, nn.AdaptiveAvgPool2d, nn.AdaptiveAvgPool3d,
    nn.AdaptiveMaxPool1d, nn.AdaptiveMaxPool2d, nn.AdaptiveMaxPool3d,
    nn.Flatten, nn.GELU, nn.Tanh, nn.Sigmoid, nn.Softmax,
})


class GuardPauses:
    """While entered, ``guard`` is off the dispatch stack inside the :data:`READ_ONLY`
    layers of ``model``. Every hook is removed on exit, and a pause a raising layer
    left open is closed."""

    def __init__(self, model: nn.Module, guard: Any, modules: list[nn.Module] | None = None):
        """``modules``: ``model.modules()``, where the caller has walked them already."""
        self.guard = guard
        self._targets = [m for m in (modules if modules is not None else model.modules())
                         if type(m) in READ_ONLY]
        self._handles: list[Any] = []
        self._paused: list[nn.Module] = []

    def __enter__(self) -> "GuardPauses":
        try:
            for m in self._targets:
                self._handles.append(add_forward_pre_hook(m, self._pause))
                self._handles.append(add_forward_hook(m, self._resume, always=True))
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        while self._handles:
            self._handles.pop().remove()
        while self._paused:  # only after a layer raised past its own hook
            self._paused.pop()
            torch._C._push_on_torch_dispatch_stack(self.guard)

    def _pause(self, module: nn.Module, args: Any) -> None:
        n = torch._C._len_torch_dispatch_stack()
        if n and torch._C._get_dispatch_stack_at(n - 1) is self.guard:
            torch._C._pop_torch_dispatch_stack(None)
            self._paused.append(module)

    def _resume(self, module: nn.Module, args: Any, out: Any) -> None:
        if self._paused and self._paused[-1] is module:
            self._paused.pop()
            torch._C._push_on_torch_dispatch_stack(self.guard)
