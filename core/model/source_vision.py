"""``torchvision:NAME`` and ``timm:NAME``: image models with their own metadata.

Weights: random by default, with a note saying so. ``NAME:pretrained`` asks
for the default weights, loaded only when they are already in the local
cache (torch hub's ``checkpoints`` folder for torchvision, the Hugging Face
cache for timm); nothing is downloaded. The example input is an image of the
size the weights expect, normalised with their mean and std; class labels
come from the weights' metadata (torchvision's ``meta["categories"]``).
Detection models (``fasterrcnn_resnet50_fpn`` ...) take a list of images
and return a list of dicts (boxes, labels, scores).
"""

from __future__ import annotations

import inspect
import os
from pathlib import Path
from typing import Any

import torch

from ..base.errors import SpecError
from ..base.meaning import CLASSES, DETECTIONS, OutputMeaning
from .source_hf import missing_package
from .source_hf import normalised_test_image
from .loaded_model import LoadedModel

RANDOM_NOTE = "random weights (nothing downloaded): outputs show structure, not trained behaviour"


def _split(spec: str, prefix: str) -> tuple[str, bool]:
    name, _, opt = spec.removeprefix(prefix).partition(":")
    name = name.strip()
    if not name:
        raise SpecError(f"{prefix} needs a model name, e.g. {prefix}resnet18")
    if opt not in ("", "pretrained"):
        raise SpecError(f"{spec}: the only option is ':pretrained' (cached weights)")
    return name, opt == "pretrained"


def load_torchvision(spec: str) -> Any:
    name, pretrained = _split(spec, "torchvision:")
    try:
        import torchvision.models as tvm  # lazy: optional (the vision extra)
    except Exception as exc:
        raise SpecError(missing_package(spec, "torchvision", "vision", exc)) from exc
    try:
        builder = tvm.get_model_builder(name)
    except ValueError as exc:
        raise SpecError(f"torchvision has no model {name!r}; see torchvision.models.list_models()"
                        ) from exc
    try:
        weights = tvm.get_model_weights(name).DEFAULT
    except Exception:  # a model without published weights
        weights = None
    notes = []
    if pretrained:
        if weights is None:
            raise SpecError(f"torchvision:{name} has no published weights; drop ':pretrained'")
        cached = Path(torch.hub.get_dir()) / "checkpoints" / Path(weights.url).name
        if not cached.is_file():
            raise SpecError(f"the weights of torchvision:{name} are not in the local cache "
                            f"({cached}); nothing is downloaded: put the file there, or drop "
                            "':pretrained' for random weights")
        model = builder(weights=weights)
    else:
        # detectors would fetch backbone weights by default: none, nothing is downloaded
        params = inspect.signature(builder).parameters
        kwargs = {"weights_backbone": None} if "weights_backbone" in params else {}
        model = builder(weights=None, **kwargs)
        notes.append(RANDOM_NOTE)
    meta = dict(weights.meta) if weights is not None else {}
    labels = list(meta.get("categories") or []) or None
    detection = "detection" in type(model).__module__ or name.startswith(
        ("fasterrcnn", "maskrcnn", "retinanet", "ssd", "fcos", "keypointrcnn"))
    size, mean, std = 224, [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]
    if weights is not None and not detection:
        try:
            t = weights.transforms()
            size = int(list(t.crop_size)[0])
            mean, std = list(t.mean), list(t.std)
        except Exception:  # transforms vary by family; keep ImageNet's
            pass
    if detection:
        # detectors normalise inside; they take a list of [0, 1] images
        example: Any = [normalised_test_image(3, 320, 320, [0.0] * 3, [1.0] * 3)[0]]
        meaning = OutputMeaning(kind=DETECTIONS, labels=labels, notes=list(notes))
    else:
        example = normalised_test_image(3, size, size, mean, std)
        meaning = OutputMeaning(kind=CLASSES, labels=labels, notes=list(notes))
    desc = f"torchvision {name}" + (" (pretrained, from the local cache)" if pretrained else
                                    " (random weights)")
    return LoadedModel(model, example, spec, "torchvision", desc, meaning=meaning, notes=notes)


def load_timm(spec: str) -> Any:
    name, pretrained = _split(spec, "timm:")
    try:
        import timm  # lazy: optional (the vision extra)
        import timm.data  # lazy: optional
    except Exception as exc:
        raise SpecError(missing_package(spec, "timm", "vision", exc)) from exc
    notes = []
    if pretrained:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")  # cached weights only
        try:
            model = timm.create_model(name, pretrained=True)
        except Exception as exc:
            raise SpecError(f"the weights of timm:{name} are not in the local cache, or do not "
                            "load; nothing is downloaded: drop ':pretrained' for random weights"
                            ) from exc
    else:
        try:
            model = timm.create_model(name, pretrained=False)
        except RuntimeError as exc:
            raise SpecError(f"timm has no model {name!r}; see timm.list_models()") from exc
        notes.append(RANDOM_NOTE)
    cfg = timm.data.resolve_data_config({}, model=model)
    c, h, w = cfg.get("input_size", (3, 224, 224))
    example = normalised_test_image(int(c), int(h), int(w), list(cfg.get("mean", [0.5] * 3)),
                                    list(cfg.get("std", [0.5] * 3)))
    labels = None
    try:
        from timm.data import ImageNetInfo  # lazy: optional, and newer timm only

        if getattr(model, "num_classes", 0) == 1000:
            info = ImageNetInfo()
            labels = [info.index_to_description(i) for i in range(1000)]
    except Exception:  # older timm: no label names, indices are shown
        pass
    meaning = OutputMeaning(kind=CLASSES, labels=labels, notes=list(notes))
    desc = f"timm {name}" + (" (pretrained, from the local cache)" if pretrained else
                             " (random weights)")
    return LoadedModel(model, example, spec, "timm", desc, meaning=meaning, notes=notes)
