"""Input sets: many inputs for one model, read lazily, one at a time.

:func:`open_inputs` opens what ``--inputs`` names:

=========================  ======================================================
a folder                   images; the class of each is the name of the subfolder
                           it is in (torchvision's ImageFolder layout), classes in
                           sorted order; images directly in the folder have none
``prompts.txt``            one text prompt a line (blank lines skipped)
``set.jsonl``              one JSON object a line: ``{"text": ..., "label": ...}``
``batch.pt``               a tensor whose first axis runs over inputs, or a dict
                           ``{"inputs": tensor, "labels": tensor, "classes": [...]}``
                           or a tuple ``(inputs, labels)``; ``torch.load`` with
                           ``weights_only=True`` only (never a pickle's code)
``batch.safetensors``      named tensors sharing their first axis; ``labels`` (or
                           ``label``) is the labels, the others the model's input
                           (one: positional, several: keywords)
=========================  ======================================================

Every set gives ``len()``, :meth:`InputSet.item` (one input, batch of one, shaped
like the model's example input), :meth:`InputSet.label` (a class index, a class
name or token text, or ``None``), ``class_names`` and :meth:`InputSet.describe`
(a file name or the text, for tables and thumbnails). Images are decoded as the
``hookscope run`` input ``digit.png`` is (:func:`~..model.inputs.load_image`).
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any, Sequence

import torch

from ..base.errors import HookscopeError, InputError
from ..base.nested import tensor_leaves
from ..base.user_text import shorten, shown, user_path
from ..model.inputs import IMAGE_SUFFIXES, _load_file, load_image
from ..model.inputs_structured import load_safetensors_input, parse_text
from .text_lines import LineIndex

#: the most images one folder may list (a folder of more is a mistake or an attack)
MAX_FILES = 1_000_000
_MAX_DEPTH = 32
_LABEL_KEYS = ("labels", "label", "targets", "target", "y")
_INPUT_KEYS = ("inputs", "input", "images", "x")


class InputSet:
    """Inputs by number; subclasses read one when asked."""

    #: "images", "text" or "tensors": how a view shows an input
    kind = "tensors"

    def __init__(self, source: str | Path) -> None:
        self.source = str(source)
        self.class_names: list[str] | None = None

    @property
    def name(self) -> str:
        return Path(self.source).name or self.source

    def __len__(self) -> int:
        raise NotImplementedError

    def item(self, i: int, example: Any = None, codec: Any = None) -> Any:
        """Input ``i`` as the model takes it (a batch of one)."""
        raise NotImplementedError

    def label(self, i: int) -> int | str | None:
        return None

    def has_labels(self) -> bool:
        return False

    def class_number(self, i: int) -> int | None:
        """Input ``i``'s class as its number in this set's own class list (an image
        folder's sorted subfolders), the label a model without class names is taken to
        use, as torchvision's ImageFolder numbers them; ``None`` where the set has none."""
        return None

    def describe(self, i: int) -> str:
        """A short name of input ``i`` for tables."""
        return f"#{i}"

    def text(self, i: int) -> str | None:
        """Input ``i``'s text (text sets only)."""
        return None

    def image_path(self, i: int) -> Path | None:
        """Input ``i``'s image file (image folders only)."""
        return None

    def check_index(self, i: int) -> int:
        if not 0 <= i < len(self):
            raise InputError(f"input {i} is outside the set {self.name} of {len(self)} inputs")
        return i


class ImageFolder(InputSet):
    kind = "images"

    def __init__(self, root: str | Path) -> None:
        super().__init__(root)
        self.root = Path(root)
        entries = _scan_dir(self.root)
        subdirs = sorted(p for p, is_dir in entries if is_dir)
        files: list[tuple[Path, int | None]] = [(p, None) for p, is_dir in sorted(entries)
                                                if not is_dir and _is_image(p)]
        self.class_names = [p.name for p in subdirs] or None
        seen = {_identity(self.root)}
        for c, d in enumerate(subdirs):
            files += [(p, c) for p in _images_under(d, seen, len(files))]
        if not files:
            raise InputError(f"folder {shown(self.root)} holds no image "
                             f"({', '.join(IMAGE_SUFFIXES)}): put images in it, one subfolder per "
                             "class")
        self.files = files

    def __len__(self) -> int:
        return len(self.files)

    def item(self, i: int, example: Any = None, codec: Any = None) -> Any:
        path = self.files[self.check_index(i)][0]
        return load_image(path, example)

    def label(self, i: int) -> int | str | None:
        c = self.files[self.check_index(i)][1]
        return None if c is None or self.class_names is None else self.class_names[c]

    def has_labels(self) -> bool:
        return self.class_names is not None

    def class_number(self, i: int) -> int | None:
        return self.files[self.check_index(i)][1]

    def describe(self, i: int) -> str:
        return str(self.files[self.check_index(i)][0].relative_to(self.root))

    def image_path(self, i: int) -> Path | None:
        return self.files[self.check_index(i)][0]


def _identity(path: Path) -> tuple[int, int]:
    st = os.stat(path)
    return st.st_dev, st.st_ino


#: The file dialog's patterns: the set files :func:`open_inputs` reads, and images (one
#: picked stands for its folder, :func:`image_set_root`).
SET_PATTERNS = ("*.txt", "*.jsonl", "*.pt", "*.pth", "*.safetensors")
IMAGE_PATTERNS = tuple(f"*{s}" for s in IMAGE_SUFFIXES)


def image_set_root(image: str | Path) -> Path:
    """The folder of images an image picked in a file dialog stands for: its own folder,
    or, where that folder is one class of torchvision's ImageFolder layout (it has sibling
    folders and its parent holds no image itself), the parent with every class."""
    folder = Path(image).parent
    parent = folder.parent
    entries = _scan_dir(parent) if parent != folder else []
    siblings = [p for p, is_dir in entries if is_dir and p != folder]
    loose = [p for p, is_dir in entries if not is_dir and _is_image(p)]
    return parent if siblings and not loose else folder


def _is_image(p: Path) -> bool:
    return p.suffix.lower() in IMAGE_SUFFIXES


def _scan_dir(folder: Path) -> list[tuple[Path, bool]]:
    """``(path, is a folder)`` of each entry; a symlink to a folder counts as one (followed
    once, loops are caught by :func:`_images_under`), hidden names are skipped."""
    try:
        with os.scandir(folder) as it:
            out = []
            for e in it:
                if e.name.startswith("."):
                    continue
                try:
                    out.append((Path(e.path), e.is_dir(follow_symlinks=True)))
                except OSError:
                    continue  # a dangling or looping link: no folder, no image
                if len(out) > MAX_FILES:
                    raise InputError(f"folder {shown(folder)} holds more than {MAX_FILES:,} "
                                     "entries: give a smaller folder")
            return out
    except OSError as exc:
        raise InputError(f"cannot list folder {shown(folder)}: {exc.strerror or exc}") from exc


def _images_under(folder: Path, seen: set[tuple[int, int]], have: int) -> list[Path]:
    """Every image under ``folder`` in sorted order; each real folder visited once (a
    symlink loop ends there), no deeper than ``_MAX_DEPTH``."""
    out: list[Path] = []
    stack = [(folder, 0)]
    while stack:
        d, depth = stack.pop()
        try:
            ident = _identity(d)
        except OSError:
            continue
        if ident in seen or depth > _MAX_DEPTH:
            continue
        seen.add(ident)
        entries = sorted(_scan_dir(d))
        out += [p for p, is_dir in entries if not is_dir and _is_image(p)]
        if have + len(out) > MAX_FILES:
            raise InputError(f"folder {shown(folder)} holds more than {MAX_FILES:,} images: "
                             "give a smaller folder")
        stack += [(p, depth + 1) for p, is_dir in reversed(entries) if is_dir]
    return sorted(out)


class TextLines(InputSet):
    """One prompt a line, through the model's tokenizer."""

    kind = "text"

    def __init__(self, path: str | Path) -> None:
        super().__init__(path)
        self.lines = LineIndex(path)
        if not len(self.lines):
            raise InputError(f"inputs file {shown(path)} has no line of text: one prompt a line")

    def __len__(self) -> int:
        return len(self.lines)

    def text(self, i: int) -> str | None:
        return self.lines.line(self.check_index(i))

    def item(self, i: int, example: Any = None, codec: Any = None) -> Any:
        return parse_text("text:" + (self.text(i) or ""), example, codec)

    def describe(self, i: int) -> str:
        return shorten(self.text(i) or "", 80)


class JsonLines(TextLines):
    """``{"text": ..., "label": ...}`` a line."""

    def _record(self, i: int) -> dict:
        raw = self.lines.line(self.check_index(i))
        try:
            rec = json.loads(raw)
        except (ValueError, RecursionError) as exc:
            raise InputError(f"line {i + 1} of {shown(self.source)} is not JSON "
                             f"({str(exc)[:80]}): write one {{\"text\": ...}} object a line") from exc
        if not isinstance(rec, dict) or not isinstance(rec.get("text"), str) or not rec["text"]:
            raise InputError(f"line {i + 1} of {shown(self.source)} has no \"text\" string: write "
                             "{\"text\": \"...\", \"label\": ...} a line")
        lab = rec.get("label")
        if lab is not None and (isinstance(lab, bool) or not isinstance(lab, (int, str))):
            raise InputError(f"line {i + 1} of {shown(self.source)}: \"label\" must be a class "
                             "number or a name")
        return rec

    def text(self, i: int) -> str | None:
        return str(self._record(i)["text"])

    def label(self, i: int) -> int | str | None:
        return self._record(i).get("label")

    def has_labels(self) -> bool:
        return self.label(0) is not None


class TensorBatch(InputSet):
    """Inputs stacked along the first axis of one or more tensors, with optional labels."""

    def __init__(self, source: str | Path, inputs: Any, labels: torch.Tensor | None,
                 class_names: Sequence[str] | None = None) -> None:
        super().__init__(source)
        leaves = tensor_leaves(inputs)
        if not leaves:
            raise InputError(f"{shown(source)} holds no input tensor")
        n = {t.shape[0] if t.dim() else -1 for _, t in leaves}
        if len(n) != 1 or -1 in n:
            raise InputError(f"the tensors of {shown(source)} must share their first axis (one "
                             f"entry per input); their shapes are "
                             f"{[tuple(t.shape) for _, t in leaves][:4]}")
        self.count = n.pop()
        if not self.count:
            raise InputError(f"{shown(source)} holds no input: its tensors' first axis (one "
                             f"entry per input) is 0 long, shapes "
                             f"{[tuple(t.shape) for _, t in leaves][:4]}; save at least one")
        if labels is not None:
            if labels.dim() != 1 or labels.shape[0] != self.count or labels.is_floating_point():
                raise InputError(f"the labels of {shown(source)} must be one integer per input "
                                 f"({self.count}), not shape {tuple(labels.shape)} "
                                 f"{labels.dtype}")
        self.inputs, self.labels = inputs, labels
        self.class_names = list(class_names) if class_names else None

    def __len__(self) -> int:
        return self.count

    def item(self, i: int, example: Any = None, codec: Any = None) -> Any:
        j = self.check_index(i)
        if isinstance(self.inputs, dict):
            return {k: v[j:j + 1].clone() for k, v in self.inputs.items()}
        if isinstance(self.inputs, tuple):
            return tuple(v[j:j + 1].clone() for v in self.inputs)
        return self.inputs[j:j + 1].clone()

    def label(self, i: int) -> int | str | None:
        if self.labels is None:
            return None
        c = int(self.labels[self.check_index(i)])
        return self.class_names[c] if self.class_names and 0 <= c < len(self.class_names) else c

    def has_labels(self) -> bool:
        return self.labels is not None


def _split_named(source: str | Path, named: dict[str, Any]) -> TensorBatch:
    named = dict(named)
    label_key = next((k for k in _LABEL_KEYS if k in named), None)
    labels = named.pop(label_key) if label_key else None
    classes = named.pop("classes", None)
    if classes is not None and not (isinstance(classes, (list, tuple))
                                    and all(isinstance(c, str) for c in classes)):
        raise InputError(f"'classes' in {shown(source)} must be a list of names")
    if labels is not None and not isinstance(labels, torch.Tensor):
        labels = torch.as_tensor(labels)
    if not all(isinstance(v, torch.Tensor) for v in named.values()):
        raise InputError(f"{shown(source)}: every entry but 'classes' must be a tensor")
    key = next((k for k in _INPUT_KEYS if k in named), None)
    inputs: Any = named[key] if key is not None else (
        next(iter(named.values())) if len(named) == 1 else named)
    return TensorBatch(source, inputs, labels, classes)


def tensor_batch_file(path: Path) -> TensorBatch:
    if path.suffix == ".safetensors":
        return _split_named(path, load_safetensors_input(path))
    value = _load_file(path)  # a regular file within budget, weights_only=True
    if isinstance(value, torch.Tensor):
        return TensorBatch(path, value, None)
    if isinstance(value, dict):
        return _split_named(path, value)
    if isinstance(value, tuple) and len(value) == 2 and all(isinstance(v, torch.Tensor)
                                                             for v in value):
        return TensorBatch(path, value[0], value[1])
    raise InputError(f"{shown(path)} holds a {type(value).__name__}: save a tensor, "
                     "{'inputs': x, 'labels': y} or (x, y) with torch.save")


SUFFIXES = (".txt", ".jsonl", ".pt", ".pth", ".safetensors")


def open_inputs(text: str | Path) -> InputSet:
    """The input set ``text`` names (see the module docstring)."""
    path = user_path(text) if isinstance(text, str) else text
    try:
        st = os.stat(path)
    except FileNotFoundError as exc:
        raise InputError(f"inputs {shown(path)} do not exist: give a folder of images, a .txt, "
                         ".jsonl, .pt or .safetensors file") from exc
    except OSError as exc:
        raise InputError(f"cannot open inputs {shown(path)}: {exc.strerror or exc}") from exc
    if stat.S_ISDIR(st.st_mode):
        return ImageFolder(path)
    suffix = path.suffix.lower()
    if suffix == ".jsonl":
        return JsonLines(path)
    if suffix in (".txt", ""):
        return TextLines(path)
    if suffix in (".pt", ".pth", ".safetensors"):
        return tensor_batch_file(path)
    raise InputError(f"inputs {shown(path)}: give a folder of images, a .txt (one prompt a line), "
                     ".jsonl, .pt or .safetensors file")


def read_items(iset: InputSet, indices: Sequence[int], example: Any = None, codec: Any = None,
               what: str = "the input set") -> list[Any]:
    """Inputs ``indices`` of ``iset`` as the model takes them (``example``, ``codec``: the
    model's example input and tokenizer); one that cannot be read so is refused naming it by
    its number in the set and its name (``what``: the set, as the person named it, e.g.
    ``--inputs prompts.txt``)."""
    items = []
    for i in indices:
        try:
            items.append(iset.item(i, example, codec))
        except HookscopeError as exc:
            raise InputError(f"{what}: input {i} ({iset.describe(i)}): {exc}") from exc
    return items
