"""Opening a ``torch.export`` archive (``.pt2``) without running code from the file.

``torch.export.load`` unpickles several entries of the archive when they are
marked so: a weight or constant with ``use_pickle``, an opaque-object constant
(``pickle.loads``), a torchbind object, and the example inputs (read with
``weights_only=True`` first, then *retried* with ``weights_only=False``). The
older zip format unpickles its state_dict the same way, and an AOTInductor
entry is a shared library torch would load. Any of these runs code chosen by
whoever made the file.

So, unless the caller trusts the file, :func:`load_exported_program` reads the
archive into memory once, checks every entry against what an ordinary
``torch.export.save`` writes (raw tensor bytes, JSON, and example inputs that
load with ``weights_only=True``), refuses the rest with a message that names
the entry, and then hands *the same bytes* to torch with every ``torch.load``
forced to ``weights_only=True``. torch's own warnings and logged tracebacks
about a corrupt file are kept off the terminal: the caller's error says it once.
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import os
import pickle
import re
import threading
import warnings
import zipfile
from pathlib import Path
from typing import Iterator

import torch

from ..base.errors import SpecError
from ..base.torch_load import load_tensors
from ..base.regular_file import open_regular

TRUST_HINT = ("Pass --trust-code (in the window: 'Trust this file' in File > Open model) only "
              "if you trust where the file came from, or re-export it with torch.export.save")

# What an ordinary torch.export.save archive holds, relative to its root folder.
_ALLOWED = [re.compile(p) for p in (
    r"archive_format", r"archive_version", r"byteorder", r"version",
    r"\.data/version", r"\.data/serialization_id",
    r"models/[^/]+\.json",
    r"data/weights/[^/]+_weights_config\.json", r"data/weights/weight_\d+",
    r"data/constants/[^/]+_constants_config\.json", r"data/constants/tensor_\d+",
    r"data/sample_inputs/[^/]+\.pt",
    r"extra/[^/].*",  # read as text only
)]
_PAYLOAD_NAME = {"weights": re.compile(r"weight_\d+"), "constants": re.compile(r"tensor_\d+")}
_env_lock = threading.Lock()


def load_exported_program(path: Path, trust_pickle: bool = False):
    """The :class:`torch.export.ExportedProgram` in ``path``; :class:`SpecError` if it
    cannot be read, or (without ``trust_pickle``) if reading it would unpickle anything."""
    try:
        with open_regular(path, "exported program", SpecError) as f:  # never a FIFO or a device
            data = f.read()
    except OSError as exc:
        raise SpecError(f"cannot read {path.name}: {exc.strerror or exc}") from exc
    if not trust_pickle:
        check_archive(data, path.name)
    guard = contextlib.nullcontext() if trust_pickle else _weights_only_everywhere()
    try:
        with quiet_torch_export(), guard:
            return torch.export.load(io.BytesIO(data))
    except Exception as exc:  # a corrupt or foreign file: torch raises many types
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise SpecError(f"cannot load {path.name} as a torch.export program: {first}") from exc


def check_archive(data: bytes, name: str) -> None:
    """Raise :class:`SpecError` unless the archive holds only entries torch reads without
    unpickling (see the module docstring)."""
    try:
        zf = zipfile.ZipFile(io.BytesIO(data))
        names = [n for n in zf.namelist() if not n.endswith("/")]
    except (zipfile.BadZipFile, ValueError, OSError) as exc:
        raise SpecError(f"{name} is not a torch.export program (not a zip archive; "
                        "is the file complete?)") from exc
    if not names:
        raise SpecError(f"{name} is an empty archive, not a torch.export program")
    if len(set(names)) != len(names):
        raise SpecError(f"{name} has duplicate entries, which readers may resolve differently; "
                        "refusing it. " + TRUST_HINT)
    roots = {n.split("/", 1)[0] for n in names}
    if len(roots) != 1 or any("/" not in n for n in names):
        raise SpecError(f"{name} is not in the current .pt2 layout (an older torch.export format "
                        "stores its weights as pickles). " + TRUST_HINT)
    root = roots.pop() + "/"
    rel = {n[len(root):]: n for n in names}
    for r in rel:
        if not any(p.fullmatch(r) for p in _ALLOWED):
            why = ("a compiled library (native code)" if r.startswith(("data/aotinductor/",
                                                                      "data/executorch/",
                                                                      "data/mtia"))
                   else "an entry torch.export.save does not write for plain tensors")
            raise SpecError(f"{name} holds {r!r}, {why}; it is not loaded. " + TRUST_HINT)
    if "archive_format" not in rel or zf.read(rel["archive_format"]).strip() != b"pt2":
        raise SpecError(f"{name} is not a torch.export program (no pt2 archive_format entry)")
    for r, full in rel.items():
        kind = ("weights" if r.endswith("_weights_config.json")
                else "constants" if r.endswith("_constants_config.json") else None)
        if kind:
            _check_payload_config(zf.read(full), kind, name)
        elif r.startswith("data/sample_inputs/"):
            _check_weights_only(zf.read(full), name)


def _check_payload_config(raw: bytes, kind: str, name: str) -> None:
    try:
        config = json.loads(raw)["config"]
        items = list(config.items())
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise SpecError(f"{name}: its {kind} table is not valid JSON; the file is damaged") from exc
    for fqn, meta in items:
        if not isinstance(meta, dict):
            raise SpecError(f"{name}: its {kind} table is malformed; the file is damaged")
        if meta.get("use_pickle") or not _PAYLOAD_NAME[kind].fullmatch(str(meta.get("path_name"))):
            raise SpecError(f"{name} stores {kind[:-1]} {str(fqn)[:80]!r} as a Python pickle, which "
                            "would run code from the file; it is not loaded. " + TRUST_HINT)


def _check_weights_only(raw: bytes, name: str) -> None:
    try:
        with _weights_only_everywhere():
            load_tensors(io.BytesIO(raw))
    except Exception as exc:  # UnpicklingError, RuntimeError, ...: all mean "not plain tensors"
        raise SpecError(f"{name} stores its example inputs as Python objects that a safe "
                        "(weights_only) load refuses; it is not loaded. " + TRUST_HINT) from exc


class _RefusingPickle:
    """Stands in for the ``pickle`` module inside torch's archive reader during a safe load."""

    def __getattr__(self, name: str):
        return getattr(pickle, name)

    @staticmethod
    def loads(*args, **kwargs):
        raise pickle.UnpicklingError("Hookscope refuses to unpickle an entry of this archive")


def _refuse_torchbind(*args, **kwargs):
    raise pickle.UnpicklingError("Hookscope refuses to load a torchbind object from this archive")


@contextlib.contextmanager
def _weights_only_everywhere() -> Iterator[None]:
    """Every ``torch.load`` inside, even one that asks for ``weights_only=False``, loads
    tensors and plain containers only (torch's own TORCH_FORCE_WEIGHTS_ONLY_LOAD switch), and
    the archive reader's ``pickle.loads`` and torchbind loader refuse: a second line of
    defence behind :func:`check_archive`, should a reader see an entry it did not."""
    from torch.export.pt2_archive import _package  # lazy: torch.export takes ~2 s to import

    key = "TORCH_FORCE_WEIGHTS_ONLY_LOAD"
    with _env_lock:
        old = os.environ.get(key)
        saved = _package.pickle, torch._C._pickle_load_obj
        os.environ[key] = "1"
        _package.pickle, torch._C._pickle_load_obj = _RefusingPickle(), _refuse_torchbind  # type: ignore[assignment]  # stands in for the pickle module
        try:
            yield
        finally:
            _package.pickle, torch._C._pickle_load_obj = saved
            if old is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = old


@contextlib.contextmanager
def quiet_torch_export() -> Iterator[None]:
    """Keep torch.export's logged tracebacks and deprecation warnings off the terminal."""
    loggers = [logging.getLogger(n) for n in ("torch.export", "torch._export",
                                              "torch.export.pt2_archive._package",
                                              "torch._export.serde.serialize")]
    loggers += [lg for n, lg in list(logging.root.manager.loggerDict.items())
                if isinstance(lg, logging.Logger) and n.startswith(("torch.export", "torch._export"))]
    before = [(lg, lg.disabled) for lg in loggers]
    for lg in loggers:
        lg.disabled = True
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        for lg, was in before:
            lg.disabled = was
