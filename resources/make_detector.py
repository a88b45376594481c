"""Write ``demo:detector``'s weights and sample picture (constructed, nothing trained).

Run by hand from the repository root (pure torch, no extra package)::

    python resources/make_detector.py

It writes, next to this file:

- ``tiny_detector.safetensors``: :func:`hookscope.core.demos.demo_detector.constructed_state_dict`,
  the colour-detector backbone and head described in :mod:`hookscope.core.demos.demo_detector`;
- ``detector_sample.png``: the sample picture (:func:`~hookscope.core.demos.demo_detector.sample_array`),
  red, green and blue shapes on a dark background, one of them dim; edit it or draw your
  own and give it with ``--input picture.png``.

It then runs the detector on the picture and prints the boxes it finds.
"""

from __future__ import annotations

from pathlib import Path

import torch
from PIL import Image
from safetensors.torch import save_file

from hookscope.core.demos.demo_detector import (DETECTOR_SAMPLE, DETECTOR_WEIGHTS, LABELS,
                                                constructed_state_dict, detector_demo, sample_array)

HERE = Path(__file__).resolve().parent


def main() -> None:
    save_file({k: v.contiguous() for k, v in constructed_state_dict().items()},
              str(HERE / DETECTOR_WEIGHTS))
    Image.fromarray(sample_array()).save(HERE / DETECTOR_SAMPLE, optimize=True)
    model, x = detector_demo()
    with torch.inference_mode():
        (found,) = model(x)
    for box, label, score in zip(found["boxes"], found["labels"], found["scores"]):
        print(f"{LABELS[int(label)]:>6} {float(score):.3f} {[int(v) for v in box]}")


if __name__ == "__main__":
    main()
