"""``demo:detector``: a tiny object detector with torchvision's output structure.

:class:`TinyDetector` finds bright coloured shapes (red, green, blue) on a dark
picture and returns what a torchvision detector returns: one dict per image
with ``boxes`` (``N x 4``, ``x1, y1, x2, y2`` in input pixels), ``labels``
(``N``, int64, 0 is the background) and ``scores`` (``N``), best first.

Its weights are *constructed*, not trained (``resources/make_detector.py``
writes them and the sample picture), so every number can be worked out by
hand:

- ``backbone.conv1`` (3x3): one colour detector per class, the 3x3 mean of
  ``2 * own channel - the other two`` minus :data:`CONV1_BIAS`;
- ``backbone.relu1``, ``backbone.conv2`` (3x3 mean per channel, a smoothing),
  ``backbone.relu2``;
- ``head`` (1x1): per-class logit ``HEAD_GAIN * (feature - HEAD_CENTRE)``;
- ``probs`` (sigmoid): the per-pixel class probability map;
- ``decode``: no weights; the pixels above :data:`PIXEL_THRESHOLD` form
  connected regions (8-neighbour), each region one box, scored by its mean
  probability.

So clamping ``backbone.conv1`` to ``[-1, 0.6]`` lowers every score and shrinks
the boxes; below ``HEAD_CENTRE`` every box goes; zeroing one channel removes
one class; scaling it by 0.5 drops the dim shape and keeps the bright ones.
Pure torch, no Qt.
"""

from __future__ import annotations

from importlib.resources import files
from typing import Any

import numpy as np
import torch
from torch import nn
import torch.nn.functional as F
from safetensors.torch import load

from ..base.meaning import DETECTIONS, OutputMeaning

LABELS = ["background", "red", "green", "blue"]  # torchvision's convention: 0 is the background
DETECTOR_WEIGHTS = "tiny_detector.safetensors"
DETECTOR_SAMPLE = "detector_sample.png"
HEIGHT, WIDTH = 96, 128
CONV1_BIAS = 0.4
HEAD_GAIN, HEAD_CENTRE = 8.0, 0.5
PIXEL_THRESHOLD = 0.2   # low, as torchvision's box_score_thresh: the view's threshold hides the weak
DETECTOR_DESCRIPTION = ("A tiny detector (constructed conv backbone, torchvision's output: boxes, "
                        "labels, scores per image) that finds red, green and blue shapes; clamp or "
                        "scale backbone.conv1 and watch boxes shrink, fade or vanish.")

# the sample picture: (label, shape, x1, y1, x2, y2, brightness); boxes in pixels, x2/y2 exclusive
SHAPES = [
    ("red", "rect", 10, 12, 40, 36, 1.0),
    ("green", "disk", 70, 16, 99, 45, 1.0),
    ("blue", "rect", 30, 56, 70, 84, 1.0),
    ("red", "rect", 96, 60, 118, 82, 0.62),   # a dim one: a weaker score, the first to go
]
COLOURS = {"red": (0.95, 0.15, 0.10), "green": (0.10, 0.85, 0.20), "blue": (0.15, 0.25, 0.95)}
BACKGROUND = 0.08


def sample_array() -> np.ndarray:
    """The sample picture, ``H x W x 3`` uint8: the :data:`SHAPES` on a dark background."""
    img = np.full((HEIGHT, WIDTH, 3), BACKGROUND, dtype=np.float64)
    ys, xs = np.mgrid[0:HEIGHT, 0:WIDTH]
    for label, shape, x1, y1, x2, y2, bright in SHAPES:
        if shape == "rect":
            inside = (xs >= x1) & (xs < x2) & (ys >= y1) & (ys < y2)
        else:  # a disk filling the box
            cx, cy, r = (x1 + x2 - 1) / 2, (y1 + y2 - 1) / 2, (x2 - x1 - 1) / 2
            inside = (xs - cx) ** 2 + (ys - cy) ** 2 <= r * r
        img[inside] = np.array(COLOURS[label]) * bright + BACKGROUND * (1 - bright)
    return (img * 255).round().astype(np.uint8)


def constructed_state_dict() -> dict[str, torch.Tensor]:
    """The detector's weights, by construction (see the module docstring)."""
    n = len(LABELS) - 1
    w1 = torch.full((n, 3, 3, 3), -1.0 / 9)
    w2 = torch.zeros(n, n, 3, 3)
    for c in range(n):
        w1[c, c] = 2.0 / 9
        w2[c, c] = 1.0 / 9
    return {"backbone.conv1.weight": w1, "backbone.conv1.bias": torch.full((n,), -CONV1_BIAS),
            "backbone.conv2.weight": w2, "backbone.conv2.bias": torch.zeros(n),
            "head.weight": torch.eye(n).mul(HEAD_GAIN).view(n, n, 1, 1),
            "head.bias": torch.full((n,), -HEAD_GAIN * HEAD_CENTRE)}


def connected_regions(mask: torch.Tensor) -> torch.Tensor:
    """Region ids (``H x W`` int64, 0 outside) of a boolean mask's 8-connected regions.

    Each pixel starts with its own id and takes the largest id among its
    neighbours in the mask until nothing changes (at most one step per pixel of
    the longest path), so a region's id is its largest pixel index + 1.
    """
    h, w = mask.shape
    ids = (torch.arange(1, h * w + 1, dtype=torch.float32, device=mask.device).view(h, w)
           * mask).view(1, 1, h, w)
    m = mask.view(1, 1, h, w).float()
    while True:
        grown = F.max_pool2d(ids, 3, stride=1, padding=1) * m
        if torch.equal(grown, ids):
            return ids.view(h, w).long()
        ids = grown


class BoxDecoder(nn.Module):
    """Probability maps ``N x classes x H x W`` -> torchvision's list of dicts, one per image."""

    def __init__(self, threshold: float = PIXEL_THRESHOLD) -> None:
        super().__init__()
        self.threshold = threshold

    def forward(self, probs: torch.Tensor) -> list[dict[str, torch.Tensor]]:
        out = []
        for image in probs:
            boxes, labels, scores = [], [], []
            for c, plane in enumerate(image):
                regions = connected_regions(plane > self.threshold)
                for rid in regions.unique():
                    if rid == 0:
                        continue
                    ys, xs = torch.nonzero(regions == rid, as_tuple=True)
                    boxes.append(torch.stack([xs.min(), ys.min(), xs.max() + 1, ys.max() + 1]))
                    labels.append(c + 1)
                    scores.append(plane[ys, xs].mean())
            box_t = (torch.stack(boxes).to(probs.dtype) if boxes
                     else torch.zeros(0, 4, dtype=probs.dtype, device=probs.device))
            score_t = (torch.stack(scores) if scores
                       else torch.zeros(0, dtype=probs.dtype, device=probs.device))
            label_t = torch.tensor(labels, dtype=torch.int64, device=probs.device)
            order = score_t.argsort(descending=True)
            out.append({"boxes": box_t[order], "labels": label_t[order], "scores": score_t[order]})
        return out


class TinyDetector(nn.Module):
    """Images ``N x 3 x H x W`` in [0, 1] (or a list of ``3 x H x W``, as torchvision takes)
    -> one dict of ``boxes``/``labels``/``scores`` per image."""

    def __init__(self) -> None:
        super().__init__()
        n = len(LABELS) - 1
        self.backbone = nn.Sequential()
        self.backbone.add_module("conv1", nn.Conv2d(3, n, 3, padding=1))
        self.backbone.add_module("relu1", nn.ReLU())
        self.backbone.add_module("conv2", nn.Conv2d(n, n, 3, padding=1))
        self.backbone.add_module("relu2", nn.ReLU())
        self.head = nn.Conv2d(n, n, 1)
        self.probs = nn.Sigmoid()
        self.decode = BoxDecoder()

    def forward(self, images: "torch.Tensor | list[torch.Tensor]") -> list[dict[str, torch.Tensor]]:
        x = torch.stack(list(images)) if isinstance(images, (list, tuple)) else images
        return self.decode(self.probs(self.head(self.backbone(x))))


def _resource(name: str) -> Any:
    return files("hookscope.resources").joinpath(name)


def sample_image() -> torch.Tensor:
    """The shipped sample picture as ``1 x 3 x H x W`` floats in [0, 1]."""
    from PIL import Image  # lazy: Pillow takes ~20 ms to import

    with _resource(DETECTOR_SAMPLE).open("rb") as fh, Image.open(fh) as img:
        arr = np.asarray(img.convert("RGB"), dtype=np.float32) / 255.0
    return torch.from_numpy(arr.copy()).permute(2, 0, 1).unsqueeze(0)


def detector_demo() -> tuple[nn.Module, torch.Tensor]:
    """:class:`TinyDetector` with its shipped weights (eval mode) and the sample picture."""
    model = TinyDetector()
    model.load_state_dict(load(_resource(DETECTOR_WEIGHTS).read_bytes()))
    model.eval()
    return model, sample_image()


def detector_meaning() -> OutputMeaning:
    return OutputMeaning(kind=DETECTIONS, labels=list(LABELS))
