"""Model A's in-place victims that are eval-mode BatchNorms, computed again from their input
when model B compares them, instead of copied in A's forward.

In a torchvision ResNet the output of every BatchNorm is overwritten in place by the ReLU
after it or by ``out += identity`` (17 of ResNet-18's 60 leaves), and the diff compares
A's value from before the overwrite, so A copied those outputs as it ran: a write of
every value, held until B's comparison. An eval-mode BatchNorm is a per-channel affine
map of its input, and that input (a convolution's output, which A keeps anyway) stays
intact; so A keeps a reference to it, and B's hook computes the output again with torch's
own ``batch_norm`` and the layer's arguments (bit for bit the values A's forward had,
as :mod:`hookscope.core.fast.victim_remake` does for captures) right before comparing
them, and drops it after.

What keeps that correct: an exact ``BatchNorm1d/2d/3d`` in eval mode with running
statistics on the CPU, with no forward hook of its own and no intervention of the plan (either could change
its output; :func:`~hookscope.core.fast.victim_remake.norm_tensors`), no global forward
hook, an output of its input's dtype and shape (no autocast). The input's and the
statistics' version counters are checked after A's forward: where one changed, A runs
again copying that layer, and the model remembers it (``ModelMemory.no_remake``). A
speed-up: ``HOOKSCOPE_FAST=0`` copies every victim.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ..base.errors import HookscopeError
from ..engine import fast_slot
from ..engine.hooks import version_of
from ..fast.victim_remake import norm_tensors


def remake_stats(module: nn.Module) -> tuple[torch.Tensor, ...] | None:
    """The statistics (and weight and bias) ``module``'s output is computed again from, or
    ``None`` where it cannot be (see the module docstring; asked before the diff's own hook
    is added, and the plan's interventions are the caller's to check)."""
    if fast_slot.active() is None or nn.modules.module._global_forward_hooks:
        return None
    return norm_tensors(module)


def _versions(ts: tuple[torch.Tensor, ...]) -> int:
    return sum(t._version for t in ts)


class Remade:
    """A BatchNorm's output in model A, as its input and the layer: :meth:`value` computes
    it again."""

    __slots__ = ("x", "version", "module", "stats", "stat_versions")

    def __init__(self, module: nn.Module, x: torch.Tensor, version: int,
                 stats: tuple[torch.Tensor, ...]):
        self.module = module
        self.x = x
        self.version = version
        self.stats = stats
        self.stat_versions = _versions(stats)

    @staticmethod
    def of(module: nn.Module, stats: tuple[torch.Tensor, ...], args: tuple,
           out: object) -> "Remade | None":
        """The layer's output as a recipe, or ``None`` where this call cannot be remade (its
        input is not a plain tensor of the output's dtype and shape, or keeps no version)."""
        x = args[0] if args else None
        if (type(out) is not torch.Tensor or type(x) is not torch.Tensor or x.dtype != out.dtype
                or x.shape != out.shape or x.requires_grad):
            return None
        version = version_of(x)
        return None if version is None else Remade(module, x, version, stats)

    @property
    def nbytes(self) -> int:
        return self.x.element_size() * self.x.numel()

    def stale(self) -> bool:
        """Whether the input or the statistics changed in place since the layer ran."""
        return version_of(self.x) != self.version or _versions(self.stats) != self.stat_versions

    def value(self, path: str) -> torch.Tensor:
        if self.stale():  # nothing between A's check and B's comparison writes them
            raise HookscopeError(f"diff: model A's input to {path!r} changed in place while "
                                 "model B ran; run the diff again")
        rm, rv, *wb = self.stats
        w, b = wb if wb else (None, None)
        eps = self.module.eps
        # the module's own call in eval mode (momentum is unused when not training), out of
        # any autocast B runs under (A's output had its input's dtype)
        if not torch.is_autocast_enabled("cpu"):
            return F.batch_norm(self.x, rm, rv, w, b, False, 0.0, eps)  # type: ignore[arg-type]
        with torch.autocast("cpu", enabled=False):
            return F.batch_norm(self.x, rm, rv, w, b, False, 0.0, eps)  # type: ignore[arg-type]
