"""Each intervention kind's arithmetic on one tensor leaf, written once in plain torch.

A kind's :meth:`~hookscope.core.plan.intervention_base.Intervention.apply_tensor`
checks its inputs (with messages that name the layer) and calls its function
here; the exported script (:mod:`hookscope.core.export`) copies the same
function's source with :func:`inspect.getsource`, so both run the same lines.

Every function here therefore uses only ``torch`` and ``math`` (the script has
no Hookscope to import) and calls only the other functions a kind lists in its
``leaf_helpers``. The signature is ``<name>_leaf(t, module, source, **params)``:
``t`` the tensor leaf, ``module`` the layer, ``source`` this leaf's output on the
pre-pass input (:class:`~hookscope.core.plan.interventions.Patch`,
:class:`~hookscope.core.plan.interventions.MeanAblate`), else ``None``.
"""

from __future__ import annotations

import math

import torch


def feature_dim(t: torch.Tensor, module: torch.nn.Module | None = None,
                dim: int | None = None) -> int:
    """The feature axis of a layer's output (units, channels).

    An explicit ``dim`` wins. Otherwise: dim 1 (channels) for the outputs of
    convolutions, batch/instance/group norms and pooling layers (N, C, ...) and
    for any output of 4 or more dims (N, C, H, W feature maps); the last dim
    otherwise (Linear, attention and embedding outputs: (..., features)).
    """
    if dim is not None:
        return dim if dim >= 0 else t.dim() + dim
    nn = torch.nn
    channel_first = (nn.modules.conv._ConvNd, nn.modules.batchnorm._BatchNorm,
                     nn.modules.instancenorm._InstanceNorm, nn.modules.pooling._MaxPoolNd,
                     nn.modules.pooling._AvgPoolNd, nn.modules.pooling._AdaptiveAvgPoolNd,
                     nn.modules.pooling._AdaptiveMaxPoolNd, nn.GroupNorm)
    if t.dim() >= 2 and (isinstance(module, channel_first) or t.dim() >= 4):
        return 1
    return t.dim() - 1


def clamp_leaf(t: torch.Tensor, module: torch.nn.Module | None, source: torch.Tensor | None,
               lo: float | None = None, hi: float | None = None) -> torch.Tensor:
    """output.clamp(lo, hi) (``None`` or an infinity: that side open); an integer output
    stays integer, its bounds rounded inward (float bounds would promote token ids
    or counts to float and feed fractions downstream)."""
    lo = None if lo is None or lo == -math.inf else lo
    hi = None if hi is None or hi == math.inf else hi
    if lo is None and hi is None:
        return t
    if t.is_floating_point():
        return t.clamp(lo, hi)
    return t.clamp(None if lo is None else math.ceil(lo), None if hi is None else math.floor(hi))


def scale_leaf(t: torch.Tensor, module: torch.nn.Module | None, source: torch.Tensor | None,
               factor: float) -> torch.Tensor:
    """output * factor; an integer output is rounded back to its dtype."""
    out = t * factor
    return out if out.dtype == t.dtype else out.round().to(t.dtype)


def zero_leaf(t: torch.Tensor, module: torch.nn.Module | None, source: torch.Tensor | None,
              units: tuple[int, ...] | None = None, dim: int | None = None) -> torch.Tensor:
    """Zero the output, or the listed units along the feature axis (:func:`feature_dim`)."""
    if units is None:
        return torch.zeros_like(t)
    d = feature_dim(t, module, dim)
    n = t.shape[d]
    out = t.clone()
    out.index_fill_(d, torch.tensor([u % n for u in units], device=t.device), 0)
    return out


def mean_leaf(t: torch.Tensor, module: torch.nn.Module | None,
              source: torch.Tensor | None) -> torch.Tensor:
    """The batch mean (dim 0) of the output, or of the reference run's output (``source``),
    broadcast to the output's shape; an integer output is rounded back to its dtype."""
    ref = t if source is None else source.to(t.device)
    if t.dim() == 0:
        return t
    out = ref.double().mean(0, keepdim=True).expand(t.shape)
    return (out if t.is_floating_point() else out.round()).to(t.dtype).contiguous()


def noise_leaf(t: torch.Tensor, module: torch.nn.Module | None, source: torch.Tensor | None,
               std: float, seed: int = 0) -> torch.Tensor:
    """output + std * N(0, 1), from a generator on the output's device seeded with ``seed``
    on every call; an integer output passes through."""
    if not t.is_floating_point():
        return t
    g = torch.Generator(device=t.device).manual_seed(seed)
    return t + std * torch.randn(t.shape, generator=g, device=t.device, dtype=t.dtype)


def patch_leaf(t: torch.Tensor, module: torch.nn.Module | None,
               source: torch.Tensor) -> torch.Tensor:
    """This layer's output on the source input (same call) instead of the target's: a copy,
    so a later in-place op (ReLU(inplace=True)) cannot change the source run."""
    return source.to(device=t.device, dtype=t.dtype, copy=True)


def add_leaf(t: torch.Tensor, module: torch.nn.Module | None, source: torch.Tensor | None,
             vector: torch.Tensor, alpha: float = 1.0, norm_units: bool = False) -> torch.Tensor:
    """output + alpha * vector along the last axis (``norm_units``: alpha times the mean
    activation norm, along the unit vector); a leaf of another width, or not floating,
    passes through."""
    if not t.is_floating_point() or t.dim() == 0 or t.shape[-1] != vector.numel():
        return t
    v = vector.to(device=t.device, dtype=t.dtype)
    if norm_units:
        v = v / v.norm() * t.norm(dim=-1).mean()
    return t + alpha * v


def project_leaf(t: torch.Tensor, module: torch.nn.Module | None, source: torch.Tensor | None,
                 vector: torch.Tensor) -> torch.Tensor:
    """output minus its component along the unit vector (last axis); a leaf of another
    width, or not floating, passes through."""
    if not t.is_floating_point() or t.dim() == 0 or t.shape[-1] != vector.numel():
        return t
    u = vector.to(device=t.device, dtype=t.dtype)
    u = u / u.norm()
    return t - (t @ u).unsqueeze(-1) * u
