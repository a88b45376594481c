"""The state a forward starts from, so both forwards of a comparison start from the same one.

A forward can read and change state outside its inputs: the random number
generators (dropout, ``torch.rand`` in ``forward``) and the module's buffers
(BatchNorm's running statistics in train mode, a step counter). If the
baseline forward advanced them, the intervened forward would start elsewhere
and an empty plan would show a difference the plan did not make.

:func:`snapshot` records the RNG states (CPU and every initialised CUDA
device) and every buffer; :func:`restore` puts them back, so the intervened
forward (and a comparison's re-run) starts exactly where the baseline did,
and a comparison leaves the model as it found it.

Forwards that need autograd (``torch.autograd.grad`` inside ``forward``)
fail under ``inference_mode``; that is remembered in the model's memory
(``ModelMemory.needs_grad``) and later forwards of it run with grad enabled.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn
from torch.nn.parameter import is_lazy
from typing import Any, Callable
from ..base.call_args import call_model
from ..base.errors import ForwardError, HookscopeError
from ..base.nested import map_tensors, tensor_leaves
from ..base.user_text import safe_str
from ..model.learned import ModelMemory, memory_for


@dataclass
class ForwardState:
    """RNG states and buffers of one moment (see :func:`snapshot`)."""

    cpu_rng: torch.Tensor
    cuda_rng: list[torch.Tensor] | None
    # owner module, buffer name, the buffer object, a copy of its values
    buffers: list[tuple[nn.Module, str, torch.Tensor, torch.Tensor]]


# torch's own normalisation layers (BatchNorm*, SyncBatchNorm, InstanceNorm*): their
# forward writes the running statistics only in train mode.
_NORM_FORWARDS = frozenset(cls.forward for cls in (
    nn.BatchNorm1d, nn.BatchNorm2d, nn.BatchNorm3d, nn.SyncBatchNorm,
    nn.InstanceNorm1d, nn.InstanceNorm2d, nn.InstanceNorm3d))


def _unchanged_by_forward(owner: nn.Module) -> bool:
    """Whether ``owner``'s forward leaves its buffers alone: a torch normalisation
    layer in eval mode, running torch's own forward (not a subclass's)."""
    return (not owner.training and isinstance(owner, nn.modules.batchnorm._NormBase)
            and type(owner).forward in _NORM_FORWARDS)


def snapshot(module: nn.Module, modules: list[nn.Module] | None = None) -> ForwardState:
    """Record the RNG states and a copy of every buffer a forward of ``module`` may change.

    Buffers of torch's normalisation layers in eval mode are not copied: their
    forward only reads them. On ResNet-50 those are all 159 of its buffers, and
    copying them was half of what a steady-state run spent outside the forward
    (0.3-0.5 ms against a 40-55 ms forward here), paid by every run that keeps
    tensors and every comparison. ``modules``: ``module.modules()`` where the
    caller has them (``unique_modules`` of a run's walk), listed since the last
    forward (one may add modules).
    """
    # cheap when there is little to record: this runs twice per comparison (Live mode)
    cuda = torch.cuda.get_rng_state_all() if torch.cuda.is_initialized() else None
    found = [(owner, name, buf) for owner in (modules if modules is not None else module.modules())
             if owner._buffers
             and not _unchanged_by_forward(owner)
             for name, buf in owner._buffers.items()
             # a lazy module's buffer holds no values until its first forward
             if buf is not None and not is_lazy(buf)]
    bufs = []
    if found:
        with torch.no_grad():
            bufs = [(owner, name, buf, buf.clone()) for owner, name, buf in found]
    return ForwardState(torch.get_rng_state(), cuda, bufs)


def restore(module: nn.Module, state: ForwardState) -> None:
    """Put ``module``'s buffers and the RNGs back as :func:`snapshot` found them.

    A buffer changed in place gets its values back; one the forward replaced
    (``self.count = self.count + 1``) gets its original tensor object back.
    """
    torch.set_rng_state(state.cpu_rng)
    if state.cuda_rng is not None:
        torch.cuda.set_rng_state_all(state.cuda_rng)
    if not state.buffers:
        return
    plain: list[tuple[torch.Tensor, torch.Tensor]] = []
    inference: list[tuple[torch.Tensor, torch.Tensor]] = []
    for owner, name, buf, saved in state.buffers:
        if owner._buffers.get(name) is not buf:
            owner._buffers[name] = buf
        # made under inference_mode: only writable there
        (inference if buf.is_inference() else plain).append((buf, saved))
    # Every buffer is copied back: BatchNorm's running statistics change in place
    # without bumping their version counter, so no counter says which did not change.
    # One call for them all (ResNet-50: 159 buffers, 0.24 -> 0.15 ms).
    with torch.no_grad():
        if plain:
            torch._foreach_copy_([b for b, _ in plain], [s for _, s in plain])
    if inference:
        with torch.inference_mode():
            torch._foreach_copy_([b for b, _ in inference], [s for _, s in inference])


def grad_mode_for(module: nn.Module, grad_mode: Callable, memory: ModelMemory | None = None) -> Callable:
    """``torch.enable_grad`` for a model whose forward needs autograd, else ``grad_mode``."""
    return torch.enable_grad if memory_for(module, memory).needs_grad else grad_mode


AUTOGRAD_HINTS = ("does not require grad", "inference tensor", "inference mode",
                  "does not have a grad_fn", "One of the differentiated Tensors")


def needs_autograd(exc: BaseException) -> bool:
    """Whether a forward's error says it needed autograd (``torch.autograd.grad``, ``backward``)."""
    return isinstance(exc, RuntimeError) and any(h in str(exc) for h in AUTOGRAD_HINTS)


AUTOGRAD_MESSAGE = ("the model's forward needs autograd (it calls torch.autograd.grad or "
                    ".backward() inside forward) and failed even with gradients enabled: "
                    "make sure the tensors it differentiates require grad "
                    "(e.g. x.requires_grad_() inside forward)")


def to_device(inputs: Any, dev: torch.device) -> Any:
    return map_tensors(lambda t: t.to(dev), inputs)


def own_copy(inputs: Any) -> Any:
    """A copy of the inputs for one forward.

    A model may change its input in place (``x.mul_(2)``); the baseline, the
    intervened forward and a re-run must each see the input as given, and the
    caller's tensors must come back unchanged.
    """
    return map_tensors(lambda t: t.clone(), inputs)


def forward(module: nn.Module, inputs: Any, grad_mode=torch.inference_mode,
            memory: ModelMemory | None = None) -> Any:
    """Call the model; its own errors come back as :class:`ForwardError`. ``memory``:
    the model's learned facts (by default the module's own), where a forward that
    needs autograd is remembered."""
    memory = memory_for(module, memory)
    try:
        with grad_mode_for(module, grad_mode, memory)():
            return call_model(module, inputs)
    except HookscopeError:
        raise
    except Exception as exc:  # the model's own error, made readable
        if needs_autograd(exc) and not memory.needs_grad:  # its forward differentiates
            memory.needs_grad = True
            return forward(module, inputs, grad_mode, memory)
        raise ForwardError(forward_error_message(module, inputs, exc)) from exc


def forward_error_message(module: nn.Module, inputs: Any, exc: Exception) -> str:
    shapes = ", ".join(f"{tuple(t.shape)} {str(t.dtype).removeprefix('torch.')}"
                       for _, t in tensor_leaves(inputs)) or "no tensors"
    text = safe_str(exc).strip()
    first = text.splitlines()[0] if text else type(exc).__name__
    if needs_autograd(exc):
        return f"{AUTOGRAD_MESSAGE} ({type(exc).__name__}: {first})"
    return (f"the model's forward failed on the input ({shapes}): {type(exc).__name__}: {first}. "
            "Check that the input's shape and dtype are what the model expects.")
