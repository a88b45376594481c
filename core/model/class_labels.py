"""Class names from a labels file, for a classifier whose weights do not carry them.

torchvision and Hugging Face weights name their classes; a person's own
``file.py:factory`` classifier does not, so its output would be read as
anonymous numbers. ``--labels FILE`` (and a session file's ``model.labels``)
names them:

- a text file, one label per line, in class order (blank lines count: line N
  is class N-1; a trailing newline does not);
- a JSON list of names, or a JSON object ``{"0": "tench", "1": "goldfish"}``
  (Hugging Face's ``id2label``), missing indices named by their number.

The labels turn a generic output into a classifier's (top-k with names) or
name a detector's classes; a language model's output is left as it is.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from ..base.errors import InputError
from ..base.meaning import CLASSES, DETECTIONS, GENERIC, OutputMeaning
from ..base.regular_file import read_regular
from ..base.user_text import shown

MAX_LABELS_BYTES = 16 * 2**20  # ImageNet-21k's names are ~0.4 MB; far past that is not a labels file


def read_labels(path: str | Path) -> list[str]:
    """The class names in ``path`` (see the module docstring); :class:`InputError` saying what is wrong."""
    p = Path(path).expanduser()
    try:  # a regular file only (never a FIFO or /dev/zero), and never more than the limit
        text = read_regular(p, MAX_LABELS_BYTES, "labels file").decode("utf-8-sig")
    except InputError as exc:
        raise InputError(f"{exc}; a labels file is a text file with one class name per line, "
                         "or a JSON list") from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"labels file {shown(str(path))} cannot be read as UTF-8 text: {exc}") from exc
    if not text.strip():
        raise InputError(f"labels file {shown(str(path))} is empty: write one class name per line")
    if p.suffix.lower() == ".json" or text.lstrip()[:1] in ("[", "{"):
        return _json_labels(text, str(path))
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [line.rstrip("\r").strip() for line in lines]


def _json_labels(text: str, name: str) -> list[str]:
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise InputError(f"labels file {shown(name)} is not valid JSON: {exc}") from exc
    if isinstance(data, list) and data and all(isinstance(x, (str, int, float)) for x in data):
        return [str(x) for x in data]
    if isinstance(data, dict) and data:
        try:
            by_index = {int(k): str(v) for k, v in data.items()}
        except (TypeError, ValueError) as exc:
            raise InputError(f"labels file {shown(name)}: the keys of a JSON object must be class "
                             "indices (\"0\", \"1\", ...)") from exc
        if min(by_index) < 0 or max(by_index) > 10**6:
            raise InputError(f"labels file {shown(name)}: class indices must be 0 to 1,000,000")
        return [by_index.get(i, str(i)) for i in range(max(by_index) + 1)]
    raise InputError(f"labels file {shown(name)} must hold a JSON list of names or an object "
                     "{\"0\": \"name\", ...}")


def with_labels(meaning: OutputMeaning, labels: list[str]) -> OutputMeaning:
    """``meaning`` with its classes named by ``labels`` (a generic output becomes a classifier's)."""
    if meaning.kind in (CLASSES, DETECTIONS):
        return dataclasses.replace(meaning, labels=list(labels))
    if meaning.kind == GENERIC:
        return dataclasses.replace(meaning, kind=CLASSES, labels=list(labels))
    raise InputError(f"labels name classes, but this model's output is read as {meaning.kind}: "
                     "drop --labels")


def name_classes(lm: Any, path: str) -> None:
    """Give the loaded model ``lm`` the class names in ``path`` (its meaning, everywhere it is read)."""
    meaning = with_labels(lm.meaning, read_labels(path))
    lm.meaning = meaning
