"""A detector's output as plain boxes: what the views draw on the input image.

Two output styles are read:

- torchvision's: a list with one dict per image, ``boxes`` (``N x 4``,
  ``x1, y1, x2, y2`` in input pixels), ``labels`` (``N``) and ``scores`` (``N``);
- DETR's (Hugging Face ``...ForObjectDetection``): ``pred_boxes``
  (``batch x queries x 4``, ``cx, cy, w, h`` as fractions of the image) and
  ``logits`` (``batch x queries x (classes + 1)``, the last class "no
  object"); a query's score is its best real class's softmax probability, its
  box is scaled to the input image's pixels.

:func:`as_torchvision` turns either into torchvision's structure;
:func:`image_boxes` gives one image's boxes as small dicts (box, label name,
score), best first, every box (the views apply their own score threshold).
Pure torch, no Qt.
"""

from __future__ import annotations

from typing import Any

import torch

from ..base.meaning import OutputMeaning


def _get(output: Any, key: str) -> Any:
    if isinstance(output, dict):
        return output.get(key)
    return getattr(output, key, None)


def is_torchvision_style(output: Any) -> bool:
    """A list (or tuple) of dicts, each with a ``boxes`` tensor."""
    return (isinstance(output, (list, tuple)) and bool(output)
            and all(isinstance(d, dict) and isinstance(d.get("boxes"), torch.Tensor)
                    for d in output))


def is_detr_style(output: Any) -> bool:
    """An output with ``pred_boxes`` (``B x Q x 4``) and ``logits`` (``B x Q x C``)."""
    boxes, logits = _get(output, "pred_boxes"), _get(output, "logits")
    return (isinstance(boxes, torch.Tensor) and isinstance(logits, torch.Tensor)
            and boxes.dim() == 3 and boxes.shape[-1] == 4 and logits.dim() == 3
            and logits.shape[:2] == boxes.shape[:2])


def image_size(inputs: Any) -> tuple[int, int] | None:
    """``(height, width)`` of the first input image, where the input is an image batch."""
    if isinstance(inputs, dict):
        inputs = inputs.get("pixel_values")
    if isinstance(inputs, (list, tuple)) and inputs and isinstance(inputs[0], torch.Tensor):
        inputs = inputs[0]
    if isinstance(inputs, torch.Tensor) and inputs.dim() in (3, 4):
        return int(inputs.shape[-2]), int(inputs.shape[-1])
    return None


def detr_to_torchvision(output: Any, size: tuple[int, int] | None) -> list[dict[str, torch.Tensor]]:
    """DETR-style ``pred_boxes``/``logits`` as torchvision's list of dicts (every query kept).

    ``size`` is the input image's ``(height, width)``; without it boxes stay in
    fractions of the image (0-1).
    """
    boxes, logits = _get(output, "pred_boxes").detach(), _get(output, "logits").detach()
    h, w = size if size is not None else (1, 1)
    probs = torch.softmax(logits.float(), dim=-1)[..., :-1]  # the last class is "no object"
    scores, labels = probs.max(dim=-1)
    cx, cy, bw, bh = boxes.float().unbind(-1)
    xyxy = torch.stack([(cx - bw / 2) * w, (cy - bh / 2) * h, (cx + bw / 2) * w,
                        (cy + bh / 2) * h], dim=-1)
    out = []
    for i in range(boxes.shape[0]):
        order = scores[i].argsort(descending=True)
        out.append({"boxes": xyxy[i][order], "labels": labels[i][order],
                    "scores": scores[i][order]})
    return out


def as_torchvision(output: Any, inputs: Any = None) -> list[dict[str, torch.Tensor]] | None:
    """``output`` in torchvision's structure, or ``None`` when it holds no detections."""
    if is_torchvision_style(output):
        return list(output)
    if is_detr_style(output):
        return detr_to_torchvision(output, image_size(inputs))
    return None


def image_boxes(output: Any, meaning: OutputMeaning | None = None, inputs: Any = None,
                image: int = 0) -> list[dict[str, Any]]:
    """Image ``image``'s detections, best first: ``{"box": [x1, y1, x2, y2], "label": name,
    "score": s}``. Empty when the output holds none (or not that many images)."""
    found = as_torchvision(output, inputs)
    if not found or image >= len(found):
        return []
    d = found[image]
    boxes = d["boxes"].detach().float().cpu().reshape(-1, 4)
    n = boxes.shape[0]
    scores = d.get("scores")
    scores = (scores.detach().float().cpu().reshape(-1) if isinstance(scores, torch.Tensor)
              else torch.ones(n))
    labels = d.get("labels")
    label_ids = labels.detach().cpu().reshape(-1).tolist() if isinstance(labels, torch.Tensor) else []
    name = (meaning or OutputMeaning()).label
    out = [{"box": [float(v) for v in boxes[i]],
            "label": name(int(label_ids[i])) if i < len(label_ids) else "",
            "score": float(scores[i]) if i < scores.numel() else 1.0} for i in range(n)]
    return sorted(out, key=lambda b: -b["score"])
