"""Which axis of a layer's output holds its features (units, channels).

Both the kinds that take units (:class:`~hookscope.core.plan.interventions.Zero`) and the
``@units=`` selector (:mod:`hookscope.core.plan.aim`) ask this one question.
"""

from __future__ import annotations

import torch
from torch import nn


def feature_dim(t: torch.Tensor, module: nn.Module | None = None, dim: int | None = None) -> int:
    """The feature axis of a layer's output, for :class:`Zero`'s units.

    An explicit ``dim`` wins. Otherwise: dim 1 (channels) for the outputs of
    convolutions, batch/instance/group norms and pooling layers (N, C, ...) and
    for any output of 4 or more dims (N, C, H, W feature maps); the last dim
    otherwise (Linear, attention and embedding outputs: (..., features)).
    """
    if dim is not None:
        return dim if dim >= 0 else t.dim() + dim
    channel_first = (nn.modules.conv._ConvNd, nn.modules.batchnorm._BatchNorm,
                     nn.modules.instancenorm._InstanceNorm, nn.modules.pooling._MaxPoolNd,
                     nn.modules.pooling._AvgPoolNd, nn.modules.pooling._AdaptiveAvgPoolNd,
                     nn.modules.pooling._AdaptiveMaxPoolNd, nn.GroupNorm)
    if t.dim() >= 2 and (isinstance(module, channel_first) or t.dim() >= 4):
        return 1
    return t.dim() - 1
