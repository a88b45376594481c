"""The real vision shapes users bring, written in plain torch (nothing downloaded).

* :class:`ResNet`: torchvision's ResNet layout for a block and stage depths:
  ``ResNet(BasicBlock, (2, 2, 2, 2))`` is ``resnet18`` (BatchNorm,
  ``ReLU(inplace=True)``, ``out += identity``), 11.69M parameters;
  ``ResNet(Bottleneck, (3, 4, 6, 3))`` is ``resnet50`` (the block's three
  convs share one ``ReLU(inplace=True)``), 25.56M parameters; the same module
  paths as torchvision's (``layer3.5.conv2``...).
* :class:`ViTB16`: torchvision's ``vit_b_16`` layout: ``conv_proj`` (16×16
  patches), a class token, ``encoder.pos_embedding``,
  ``encoder.layers.encoder_layer_N`` with ``ln_1``, ``self_attention``
  (``nn.MultiheadAttention``), ``ln_2`` and an ``mlp`` of Linear-GELU-Linear,
  ``encoder.ln``, ``heads.head``; 86.57M parameters.

Both are seeded and built in eval mode by :mod:`bench.models`.
"""

from __future__ import annotations

from collections import OrderedDict

import torch
from torch import nn


class BasicBlock(nn.Module):
    expansion = 1

    def __init__(self, inplanes: int, planes: int, stride: int = 1,
                 downsample: nn.Module | None = None):
        super().__init__()
        self.conv1 = nn.Conv2d(inplanes, planes, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.downsample = downsample
        self.stride = stride

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x
        out = self.conv1(x)
        out = self.bn1(out)
        out = self.relu(out)
        out = self.conv2(out)
        out = self.bn2(out)
        if self.downsample is not None:
            identity = self.downsample(x)
        out += identity  # in place, as torchvision does: overwrites bn2's output
        out = self.relu(out)
        return out


class Bottleneck(nn.Module):
    expansion = 4

    def __init__(self, inplanes: int, planes: int, stride: int = 1,
                 downsample: nn.Module | None = None):
        super().__init__()
        self.conv1 = nn.Conv2d(inplanes, planes, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, stride, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.conv3 = nn.Conv2d(planes, planes * 4, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(planes * 4)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = downsample

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        if self.downsample is not None:
            identity = self.downsample(x)
        out += identity  # in place, as torchvision does
        return self.relu(out)


class ResNet(nn.Module):
    """torchvision's ResNet layout for a ``block`` (BasicBlock or Bottleneck) and the
    number of blocks of each of the four stages (``resnet18``: BasicBlock, 2-2-2-2;
    ``resnet50``: Bottleneck, 3-4-6-3), with torchvision's module paths."""

    def __init__(self, block: type[nn.Module], layers: tuple[int, int, int, int],
                 num_classes: int = 1000):
        super().__init__()
        self.block = block
        self.inplanes = 64
        self.conv1 = nn.Conv2d(3, 64, 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        self.layer1 = self._make_layer(64, layers[0])
        self.layer2 = self._make_layer(128, layers[1], stride=2)
        self.layer3 = self._make_layer(256, layers[2], stride=2)
        self.layer4 = self._make_layer(512, layers[3], stride=2)
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(512 * block.expansion, num_classes)  # type: ignore[operator]
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(m, nn.BatchNorm2d):
                # Non-trivial running stats so BN is not the identity in eval mode.
                nn.init.uniform_(m.weight, 0.5, 1.5)
                nn.init.normal_(m.bias, 0.0, 0.1)
                m.running_mean.normal_(0.0, 0.1)
                m.running_var.uniform_(0.5, 1.5)

    def _make_layer(self, planes: int, blocks: int, stride: int = 1) -> nn.Sequential:
        out = planes * self.block.expansion  # type: ignore[operator]
        downsample = None
        if stride != 1 or self.inplanes != out:
            downsample = nn.Sequential(nn.Conv2d(self.inplanes, out, 1, stride, bias=False),
                                       nn.BatchNorm2d(out))
        layers = [self.block(self.inplanes, planes, stride, downsample)]
        self.inplanes = out
        layers += [self.block(out, planes) for _ in range(1, blocks)]
        return nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


class MLPBlock(nn.Sequential):
    def __init__(self, d: int, hidden: int):
        super().__init__(nn.Linear(d, hidden), nn.GELU(), nn.Dropout(0.0), nn.Linear(hidden, d),
                         nn.Dropout(0.0))


class EncoderBlock(nn.Module):
    def __init__(self, heads: int, d: int, hidden: int):
        super().__init__()
        self.ln_1 = nn.LayerNorm(d, eps=1e-6)
        self.self_attention = nn.MultiheadAttention(d, heads, dropout=0.0, batch_first=True)
        self.dropout = nn.Dropout(0.0)
        self.ln_2 = nn.LayerNorm(d, eps=1e-6)
        self.mlp = MLPBlock(d, hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.ln_1(x)
        y, _ = self.self_attention(y, y, y, need_weights=False)
        x = self.dropout(y) + x
        return x + self.mlp(self.ln_2(x))


class Encoder(nn.Module):
    def __init__(self, seq: int, layers: int, heads: int, d: int, hidden: int):
        super().__init__()
        self.pos_embedding = nn.Parameter(torch.empty(1, seq, d).normal_(std=0.02))
        self.dropout = nn.Dropout(0.0)
        self.layers = nn.Sequential(OrderedDict(
            (f"encoder_layer_{i}", EncoderBlock(heads, d, hidden)) for i in range(layers)))
        self.ln = nn.LayerNorm(d, eps=1e-6)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.ln(self.layers(self.dropout(x + self.pos_embedding)))


class ViTB16(nn.Module):
    def __init__(self, image: int = 224, patch: int = 16, layers: int = 12, heads: int = 12,
                 d: int = 768, hidden: int = 3072, num_classes: int = 1000):
        super().__init__()
        self.patch, self.d = patch, d
        self.conv_proj = nn.Conv2d(3, d, patch, patch)
        self.class_token = nn.Parameter(torch.zeros(1, 1, d))
        self.encoder = Encoder((image // patch) ** 2 + 1, layers, heads, d, hidden)
        self.heads = nn.Sequential(OrderedDict(head=nn.Linear(d, num_classes)))
        for m in self.modules():
            if isinstance(m, nn.Linear):
                nn.init.normal_(m.weight, std=0.02)
                nn.init.zeros_(m.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n = x.shape[0]
        x = self.conv_proj(x).reshape(n, self.d, -1).permute(0, 2, 1)
        x = torch.cat([self.class_token.expand(n, -1, -1), x], dim=1)
        return self.heads(self.encoder(x)[:, 0])
