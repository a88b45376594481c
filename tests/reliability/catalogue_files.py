"""The files the catalogue's cases point at, built once per test in a temporary folder.

Every bad file is made the way a person would end up with it (a truncated
download, a header that lies, a PostScript file renamed .png), never by
mocking the loader.
"""

from __future__ import annotations

import io
import struct
import zlib
from pathlib import Path

import numpy as np
import torch

import hostile_files as hf


def png_header(width: int, height: int) -> bytes:
    """A PNG whose header claims ``width`` x ``height`` (the data is one row: enough to open)."""
    def chunk(tag: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(b"\0" * (width + 1))) + chunk(b"IEND", b""))


def npy_claiming(shape: tuple[int, ...]) -> bytes:
    """A float64 .npy whose header claims ``shape`` but which holds ten values."""
    buf = io.BytesIO()
    np.save(buf, np.zeros(10))
    data = buf.getvalue()
    claimed = data.replace(b"(10,)", repr(tuple(shape)).encode())
    header_end = claimed.index(b"\n") + 1
    return claimed[:header_end] + data[data.index(b"\n") + 1:]


def build(folder: Path) -> dict[str, Path]:
    """Every catalogue file by name; marker payloads point at ``folder / 'MARKER'``."""
    marker = folder / "MARKER"
    f: dict[str, Path] = {}

    def put(name: str, data: bytes) -> None:
        (folder / name).write_bytes(data)
        f[name] = folder / name

    put("huge.npy", npy_claiming((5_000_000_000,)))  # 37 GiB of float64
    buf = io.BytesIO()
    np.save(buf, np.zeros((100, 100)))
    put("truncated.npy", buf.getvalue()[:500])
    put("garbage.npy", b"\x93NUMPY not really")
    obj = np.empty(1, dtype=object)
    obj[0] = hf.MarkerPayload(marker)
    buf = io.BytesIO()
    np.save(buf, obj, allow_pickle=True)
    put("objects.npy", buf.getvalue())
    put("giant.png", png_header(20000, 20000))
    put("postscript.png", b"%!PS-Adobe-3.0 EPSF-3.0\n%%BoundingBox: 0 0 10 10\nshowpage\n")
    put("truncated.png", png_header(4, 4)[:40])
    buf = io.BytesIO()
    torch.save(torch.zeros(100_000), buf)  # 400 kB of tensor data
    put("big_input.pt", buf.getvalue())
    put("evil_input.pt", hf.torch_save_payload(marker))
    put("evil_weights.pt", hf.torch_save_payload(marker))
    put("broken.safetensors", b"\xff\xff\xff\xff\xff\xff\xff\x7f{")
    put("model.pt", hf.pickle_payload(marker))  # a full pickle: needs --trust-code
    genuine = hf.genuine_pt2(folder / "genuine.pt2").read_bytes()
    put("truncated.pt2", genuine[: len(genuine) // 2])
    put("text.pt2", b"just text\n")
    for name, make in hf.HOSTILE_PT2.items():
        f["hostile " + name] = make(folder, marker)
    f["native.pt2"] = hf.pt2_native_library(folder)
    put("exits_at_import.py", b"import sys\nsys.exit('no model here')\n")
    put("argv_at_import.py", b"import argparse\nimport torch\n"
        b"p = argparse.ArgumentParser()\np.add_argument('--scale', type=float, default=1.0)\n"
        b"ARGS = p.parse_args()  # fails on Hookscope's own arguments unless argv is clean\n"
        b"def make():\n    return torch.nn.Linear(3, 2), torch.ones(1, 3)\n")
    put("a_file", b"not a folder")
    f["MARKER"] = marker
    torch.manual_seed(0)
    return f


def unwritable_folder(tmp_path: Path) -> Path | None:
    """A folder this process cannot create files in: ``tmp_path/ro`` with mode 0555, or, for
    root (which ignores modes), the read-only ``/sys``; None if there is none."""
    ro = tmp_path / "ro"
    ro.mkdir(exist_ok=True)
    ro.chmod(0o555)
    for folder in (ro, Path("/sys")):
        if folder.is_dir() and not _can_create(folder):
            return folder
    return None


def _can_create(folder: Path) -> bool:
    probe = folder / ".hookscope-probe"
    try:
        probe.touch()
    except OSError:
        return False
    probe.unlink()
    return True
