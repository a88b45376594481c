"""Captures of in-place victims rebuilt from their intact input on first read.

A layer whose output a later in-place op overwrites (a victim, see
core/inplace_victims.py) must have its capture copied, or the capture shows the
overwritten values. In a torchvision ResNet every BatchNorm is a victim (the
ReLU after it runs in place, ``out += identity`` writes into the last one): 49
of ResNet-50's 158 layers, and copying them costs 3-6% of its forward.

An eval-mode torch BatchNorm is a per-channel affine map of its input, and its
input (a convolution's output) stays intact. So instead of copying the output
in the forward, its hook keeps a reference to the input, and the capture is
computed again, by the same kernel with the same arguments (bit for bit the
same values), when it is first read. A run then pays what a reference costs; a
reader pays for the layers it reads.

What keeps that correct:

* Only exact ``BatchNorm1d/2d/3d`` modules in eval mode with running statistics,
  torch's own forward, no forward hook but ours and no global forward hook (any of
  those could change the output), no autocast-changed dtype, on the CPU.
* The statistics, weight and bias are copied after the forward (one ``torch.cat``
  per layer, kept for later runs while their version counters say nothing changed),
  so an optimizer step or a ``load_state_dict`` before the read changes nothing;
  they are checked unchanged between arming the hooks and the end of the forward.
* The input's version counter is checked after the forward: a later in-place op
  on the input itself makes the layer stale, the caller re-runs and copies it
  from then on (``HookSession(no_remake=...)``). Read after the user changed
  the input in place (it is also the previous layer's capture), the record says so
  instead of showing wrong values.
"""

from __future__ import annotations

import weakref

import torch
import torch.nn.functional as F
from torch import nn

from .errors import HookscopeError

_BATCH_NORMS = (nn.BatchNorm1d, nn.BatchNorm2d, nn.BatchNorm3d)

# Per layer: the copy of its statistics (and weight and bias) that remade captures read,
# with the tensors and the sum of their versions it was taken from, and eps. Reused by
# every later run while those are unchanged: a steady run copies nothing.
_COPIES: "weakref.WeakKeyDictionary[nn.Module, tuple[tuple[torch.Tensor, ...], int, float, Norm]]" = (
    weakref.WeakKeyDictionary())

# A copied layer's (running mean, variance[, weight, bias]) laid end to end, the
# channel count, and eps.
Norm = tuple[torch.Tensor, int, float]


def _version(t: torch.Tensor) -> int | None:
    try:
        return t._version
    except RuntimeError:  # inference tensors keep no version counter
        return None


def norm_tensors(module: nn.Module) -> tuple[torch.Tensor, ...] | None:
    """The tensors a remade capture of ``module`` needs (running mean and variance,
    then weight and bias where the layer has them), or ``None`` where its capture
    cannot be remade (see the module docstring; global forward hooks are the
    caller's to check). Runs for every victim of every run: dict lookups, not
    ``nn.Module.__getattr__``."""
    if (type(module) not in _BATCH_NORMS or module.training or module._forward_hooks
            or "forward" in module.__dict__):
        return None
    bufs, params = module._buffers, module._parameters
    rm, rv = bufs.get("running_mean"), bufs.get("running_var")
    w, b = params.get("weight"), params.get("bias")
    if rm is None or rv is None or (w is None) != (b is None):
        return None
    ts: tuple[torch.Tensor, ...] = (rm, rv) if w is None or b is None else (rm, rv, w, b)
    dtype = rm.dtype
    for t in ts:
        if not t.is_cpu or t.dtype is not dtype or t.is_inference():
            return None
    return ts


def param_versions(tensors: tuple[torch.Tensor, ...]) -> int:
    """A number that grows whenever one of ``tensors`` is changed in place."""
    return sum(t._version for t in tensors)


def norm_copy(module: nn.Module, tensors: tuple[torch.Tensor, ...], versions: int) -> Norm:
    """The copy of ``tensors`` (``module``'s, at ``versions``) a remade capture reads:
    the one an earlier run made while nothing changed since, else a new one."""
    got = _COPIES.get(module)
    eps = float(module.eps)  # type: ignore[arg-type]  # a BatchNorm's float
    if (got is not None and got[1] == versions and got[2] == eps
            and all(a is b for a, b in zip(got[0], tensors))):
        return got[3]
    with torch.no_grad():
        norm = (torch.cat(tensors), tensors[0].numel(), eps)
    _COPIES[module] = (tensors, versions, eps, norm)
    return norm


class Remake:
    """How to compute one remade capture: its input, the input's version when the
    layer ran, and the layer's copied statistics (see :func:`norm_copy`)."""

    __slots__ = ("x", "version", "norm")

    def __init__(self, x: torch.Tensor, version: int, norm: Norm) -> None:
        self.x = x
        self.version = version
        self.norm = norm

    @property
    def nbytes(self) -> int:
        return self.x.element_size() * self.x.numel()

    def value(self, path: str) -> torch.Tensor:
        if _version(self.x) != self.version:
            raise HookscopeError(
                f"the capture of {path!r} is computed from its input when first read, and that "
                "input (the capture of the layer before it) was changed in place after the run. "
                "Read this capture before changing another in place, or change a clone "
                "(tensor.clone()) instead.")
        flat, c, eps = self.norm
        rm, rv = flat[:c], flat[c:2 * c]
        w, b = (flat[2 * c:3 * c], flat[3 * c:]) if flat.numel() == 4 * c else (None, None)
        with torch.no_grad(), torch.autocast("cpu", enabled=False):
            # The module's own call in eval mode (momentum is unused when not training).
            return F.batch_norm(self.x.detach(), rm, rv, w, b, False, 0.0, eps)
