"""Write ``digits_test.safetensors``: 200 images of the digits demo's own test split.

Run by hand from the repository root (needs scikit-learn, the ``train`` extra)::

    python resources/make_digits_test.py

The split is the one ``train_demos.py`` held out when it trained ``demo:cnn``
(sklearn's ``load_digits()``, pixels / 16.0, ``train_test_split(test_size=0.2,
random_state=0, stratify=target)``); the first 200 of its 360 images, in the split's
order. The file holds ``inputs`` (float32, 200 x 1 x 8 x 8), ``labels`` (int64, 200)
and ``dataset_index`` (int64, 200: each image's index in ``load_digits()``), so
``hookscope scan demo:cnn --inputs digits_test.safetensors`` scans it as it is. Writing
it again gives the same bytes.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from safetensors.torch import save_file

HERE = Path(__file__).resolve().parent
SEED = 0  # train_demos.SEED: the same split
COUNT = 200


def main() -> None:
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    digits = load_digits()
    x = (digits.images / 16.0).astype(np.float32)[:, None, :, :]
    y = digits.target.astype(np.int64)
    idx = np.arange(len(y))
    _, idx_test = train_test_split(idx, test_size=0.2, random_state=SEED, stratify=y)
    pick = idx_test[:COUNT]
    out = HERE / "digits_test.safetensors"
    save_file({"inputs": torch.from_numpy(np.ascontiguousarray(x[pick])),
               "labels": torch.from_numpy(y[pick]),
               "dataset_index": torch.from_numpy(pick.astype(np.int64))}, str(out))
    print(f"wrote {out.name}: {COUNT} images, classes {np.bincount(y[pick]).tolist()}")


if __name__ == "__main__":
    main()
