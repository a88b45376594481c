"""Captures of in-place victims rebuilt from their intact input on first read.

A layer whose output a later in-place op overwrites (a victim, see
core/fast/inplace_guard.py) must have its capture copied, or the capture shows the
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
* The statistics, weight and bias are copied after every forward (one ``torch.cat``
  for all of a run's remade layers, :class:`NormStore`), so an optimizer
  step, a ``load_state_dict`` or a write through ``.data`` before the read changes
  nothing. Their version counters are checked unchanged between arming the hooks
  and the end of the forward (a write through ``.data`` inside the forward, after
  the layer ran, is the one change this cannot see).
* The input's version counter is checked after the forward: a later in-place op
  on the input itself makes the layer stale, the caller re-runs and copies it
  from then on (``FastSession(no_remake=...)``, ``ModelMemory.no_remake``). Read after the user changed
  the input in place (it is also the previous layer's capture), the record says so
  instead of showing wrong values.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ..base.errors import HookscopeError
from ..engine.hooks import version_of as _version

_BATCH_NORMS = (nn.BatchNorm1d, nn.BatchNorm2d, nn.BatchNorm3d)

# Where a layer's copied tensors lie in its dtype's copy: offset, channel count,
# whether weight and bias follow the running mean and variance, and eps.
Where = tuple[int, int, bool, float]


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


class NormStore:
    """The statistics, weights and biases of one run's remade layers.

    Gathered as the hooks are armed (:meth:`add`, then :meth:`seal`), checked
    unchanged after the forward (:meth:`changed`: their version counters, summed
    once for all layers) and copied then (:meth:`copies`: one ``torch.cat`` per
    dtype, ~0.1 ms for ResNet-50's 196 tensors). A copy is never carried over to a
    later run: a write through ``.data`` (``bn.weight.data.fill_(1)``) changes no
    version counter.
    """

    __slots__ = ("groups", "armed", "flats")

    def __init__(self) -> None:
        self.groups: dict[torch.dtype, tuple[list[torch.Tensor], list[int]]] = {}
        self.armed = 0
        self.flats: dict[torch.dtype, torch.Tensor] | None = None

    def add(self, module: nn.Module, norm: tuple[torch.Tensor, ...]) -> tuple[torch.dtype, Where]:
        """Take ``module``'s tensors (:func:`norm_tensors`); where its copy will lie."""
        dtype = norm[0].dtype
        ts, size = self.groups.setdefault(dtype, ([], [0]))
        c = norm[0].numel()
        where = (size[0], c, len(norm) == 4, float(module.eps))  # type: ignore[arg-type]
        ts.extend(norm)
        size[0] += c * len(norm)
        return dtype, where

    def _versions(self) -> int:
        return sum(t._version for ts, _ in self.groups.values() for t in ts)

    def seal(self) -> None:
        """Every layer is added: remember the versions to check after the forward."""
        self.armed = self._versions()

    def changed(self) -> bool:
        """Whether any of the tensors changed in place since :meth:`seal` (then no
        capture of this run can be remade: the caller copies them instead)."""
        return bool(self.groups) and self._versions() != self.armed

    def copies(self) -> dict[torch.dtype, torch.Tensor]:
        """The copy of every added tensor, per dtype (made on the first call)."""
        if self.flats is None:
            with torch.no_grad():
                self.flats = {d: torch.cat(ts) for d, (ts, _) in self.groups.items()}
        return self.flats


class Remake:
    """How to compute one remade capture: its input, the input's version when the
    layer ran, and where the layer's copied statistics lie (see :class:`NormStore`)."""

    __slots__ = ("x", "version", "flat", "where")

    def __init__(self, x: torch.Tensor, version: int, flat: torch.Tensor, where: Where) -> None:
        self.x = x
        self.version = version
        self.flat = flat
        self.where = where

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
        off, c, affine, eps = self.where
        flat = self.flat
        rm, rv = flat[off:off + c], flat[off + c:off + 2 * c]
        w, b = (flat[off + 2 * c:off + 3 * c], flat[off + 3 * c:off + 4 * c]) if affine else (None, None)
        with torch.no_grad(), torch.autocast("cpu", enabled=False):
            # The module's own call in eval mode (momentum is unused when not training).
            return F.batch_norm(self.x.detach(), rm, rv, w, b, False, 0.0, eps)
