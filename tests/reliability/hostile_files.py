"""Hostile files for the catalogue: each would create a marker file if Hookscope unpickled it.

The payload is a pickle whose ``__reduce__`` calls ``open(marker, "w")``, so a
test only has to check that the marker never appears. The ``.pt2`` variants
start from a genuine ``torch.export.save`` archive and swap one entry for the
payload, in each of the places torch's loader unpickles: a weight or a constant
marked ``use_pickle``, an opaque-object constant (``pickle.loads``), and the
example inputs (``torch.load`` retried with ``weights_only=False``).
"""

from __future__ import annotations

import os

import io
import json
import pickle
import zipfile
from pathlib import Path

import torch
from torch import nn


class MarkerPayload:
    """Unpickling this opens ``marker`` for writing: the proof that code from the file ran."""

    def __init__(self, marker: Path):
        self.marker = str(marker)

    def __reduce__(self):
        # os.mkdir: the marker appears if the payload runs, and no file handle is left open
        return (os.mkdir, (str(self.marker),))


def pickle_payload(marker: Path) -> bytes:
    return pickle.dumps(MarkerPayload(marker))


def torch_save_payload(marker: Path) -> bytes:
    buf = io.BytesIO()
    torch.save({"x": MarkerPayload(marker)}, buf)
    return buf.getvalue()


_GENUINE: list[bytes] = []


def genuine_pt2(path: Path) -> Path:
    """A small, honest exported program with parameters and example inputs (exported once)."""
    if not _GENUINE:
        model = nn.Sequential(nn.Linear(3, 4), nn.ReLU())
        ep = torch.export.export(model.eval(), (torch.ones(1, 3),))
        buf = io.BytesIO()
        torch.export.save(ep, buf)
        _GENUINE.append(buf.getvalue())
    path.write_bytes(_GENUINE[0])
    return path


def _rewrite(src: Path, dst: Path, edit) -> Path:
    """Copy the archive ``src`` to ``dst``; ``edit(name_without_root, data)`` returns new
    bytes (or None to keep), and may add entries through its ``extra`` attribute."""
    with zipfile.ZipFile(src) as zin:
        names = zin.namelist()
        root = names[0].split("/", 1)[0] + "/"
        entries = [(n, zin.read(n)) for n in names]
    with zipfile.ZipFile(dst, "w", zipfile.ZIP_STORED) as zout:
        for name, data in entries:
            new = edit(name[len(root):], data)
            zout.writestr(name, data if new is None else new)
        for rel, data in getattr(edit, "extra", {}).items():
            zout.writestr(root + rel, data)
    return dst


def pt2_pickled_weight(tmp: Path, marker: Path) -> Path:
    """The first weight is marked ``use_pickle`` and holds the payload."""
    def edit(rel, data):
        if rel.endswith("_weights_config.json"):
            cfg = json.loads(data)
            first = next(iter(cfg["config"].values()))
            first["use_pickle"] = True
            return json.dumps(cfg).encode()
        if rel == "data/weights/weight_0":
            return torch_save_payload(marker)
        return None
    return _rewrite(genuine_pt2(tmp / "genuine.pt2"), tmp / "pickled_weight.pt2", edit)


def pt2_pickled_sample_inputs(tmp: Path, marker: Path) -> Path:
    """The example inputs are a pickle that ``weights_only=True`` refuses (torch then retries unsafely)."""
    def edit(rel, data):
        return torch_save_payload(marker) if rel.startswith("data/sample_inputs/") else None
    return _rewrite(genuine_pt2(tmp / "genuine.pt2"), tmp / "pickled_inputs.pt2", edit)


def pt2_opaque_constant(tmp: Path, marker: Path) -> Path:
    """A constant stored as an opaque object, which torch reads with ``pickle.loads``."""
    def edit(rel, data):
        if rel.endswith("_constants_config.json"):
            return json.dumps({"config": {"evil": {"path_name": "opaque_obj_0", "is_param": False,
                                                   "use_pickle": True, "tensor_meta": None}}}).encode()
        return None
    edit.extra = {"data/constants/opaque_obj_0": pickle_payload(marker)}
    return _rewrite(genuine_pt2(tmp / "genuine.pt2"), tmp / "opaque_constant.pt2", edit)


def pt2_native_library(tmp: Path) -> Path:
    """An AOTInductor entry: a shared library torch would dlopen (native code)."""
    def edit(rel, data):
        return None
    edit.extra = {"data/aotinductor/model/model.so": b"\x7fELF not really"}
    return _rewrite(genuine_pt2(tmp / "genuine.pt2"), tmp / "native.pt2", edit)


HOSTILE_PT2 = {
    "pickled weight": pt2_pickled_weight,
    "pickled example inputs": pt2_pickled_sample_inputs,
    "opaque-object constant": pt2_opaque_constant,
}
