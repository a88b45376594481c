"""torchvision's classifiers as a user would open them, where torchvision cannot import.

``hookscope bench/torchvision_layouts.py:resnet50 --input photo.png --labels
bench/imagenet_classes.txt`` opens torchvision's ``resnet50`` layout (the same
module paths, :mod:`bench.models_vision`) with random weights, the way a
person opens their own ``file.py:factory`` classifier. ``imagenet_classes.txt``
is torchvision's list of the 1000 ImageNet class names (from its
``_IMAGENET_CATEGORIES``), one per line.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # `bench` importable from a file spec

from bench.models_vision import Bottleneck, ResNet, ViTB16  # noqa: E402


def resnet50():
    """torchvision's resnet50 layout, seeded random weights; a 224² image as the example."""
    torch.manual_seed(0)
    return ResNet(Bottleneck, (3, 4, 6, 3)).eval(), torch.rand(1, 3, 224, 224)


def vit_b16():
    """torchvision's vit_b_16 layout, seeded random weights; a 224² image as the example."""
    torch.manual_seed(0)
    return ViTB16().eval(), torch.rand(1, 3, 224, 224)
