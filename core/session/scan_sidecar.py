"""A session's scan result in a sidecar file beside the session file.

Saving a session that holds a scan (:attr:`Session.saved_scan`) writes
``NAME.hookscope.scan.json`` next to ``NAME.hookscope.json`` (JSON only, see
:mod:`hookscope.core.analyses.scan_saved`) and names it in the session file by its
file name and SHA-256::

    "scan": {"file": "NAME.hookscope.scan.json", "sha256": "..."}

The sidecar's name is derived from the session's, and a file already at that name
that is not a saved scan (or is not a regular file) is never replaced. Reading is
bounded and never stops the session from opening: a sidecar that is missing,
altered (its hash differs), outside the session's folder, not a regular file, too
large, nested too deep or damaged gives a one-line note and no scan.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..base.json_safe import nesting_depth
from ..base.atomic_write import write_bytes
from ..base.errors import HookscopeError
from ..base.regular_file import read_regular
from ..analyses.scan_result import ScanResult
from ..analyses.scan_saved import FORMAT, ScanDataError, scan_from_data, scan_to_data

SIDECAR_SUFFIX = ".hookscope.scan.json"
#: the largest sidecar read back (a scan of many units and inputs stays far below)
MAX_SIDECAR_BYTES = 64 * 1024 * 1024
#: how deep a sidecar's JSON may nest (scan_to_data writes five levels)
MAX_SIDECAR_DEPTH = 8
#: the longest unit text (``LAYER:INDEX``) put back into the Scan dock
MAX_UNIT_CHARS = 500


@dataclass
class SavedScan:
    """A scan result a session keeps, and the unit (``"fc1:3"``) whose top inputs show."""

    result: ScanResult
    unit: str = ""


class SidecarError(HookscopeError):
    """A sidecar that is not read back: the message says why, in one line."""


def sidecar_name(session_path: str | Path) -> str:
    """``NAME.hookscope.scan.json`` for the session file ``NAME.hookscope.json``."""
    name = Path(session_path).name
    for suffix in (".hookscope.json", ".json"):
        if name.endswith(suffix) and len(name) > len(suffix):
            return name[: -len(suffix)] + SIDECAR_SUFFIX
    return name + SIDECAR_SUFFIX


def _refuse_foreign(target: Path) -> None:
    """Raise unless ``target`` is absent or an earlier saved scan (which may be replaced)."""
    try:
        st = os.lstat(target)
    except FileNotFoundError:
        return
    except OSError as exc:
        raise SidecarError(f"cannot check {target}: {exc.strerror or exc}") from exc
    foreign = f"{target} exists and is not a saved scan: the scan was not saved beside the " \
              "session (move that file away, or save the session under another name)"
    if not stat.S_ISREG(st.st_mode):
        raise SidecarError(foreign)
    try:
        head = read_regular(target, MAX_SIDECAR_BYTES, "the old sidecar", SidecarError,
                            own=True)
        ok = json.loads(head.decode("utf-8")).get("format") == FORMAT
    except (HookscopeError, ValueError, AttributeError, RecursionError):
        ok = False
    if not ok:
        raise SidecarError(foreign)


def write_sidecar(session_path: str | Path, saved: SavedScan) -> dict:
    """Write ``saved`` beside the session file ``session_path``, whole or not at all;
    the session file's ``"scan"`` entry (file name and SHA-256)."""
    target = Path(session_path).expanduser().resolve().parent / sidecar_name(session_path)
    _refuse_foreign(target)
    data = scan_to_data(saved.result)
    data["unit"] = saved.unit
    raw = (json.dumps(data, allow_nan=False, separators=(",", ":")) + "\n").encode("utf-8")
    write_bytes(target, raw)
    return {"file": target.name, "sha256": hashlib.sha256(raw).hexdigest()}


def _depth(value: Any) -> int:
    return nesting_depth(value, MAX_SIDECAR_DEPTH)


def read_sidecar(entry: Any, folder: Path) -> SavedScan:
    """The scan the session file's ``"scan"`` ``entry`` names in ``folder`` (raises
    :class:`SidecarError` with one line that says why it is not shown)."""
    if not isinstance(entry, dict) or not isinstance(entry.get("file"), str) \
            or not isinstance(entry.get("sha256"), str):
        raise SidecarError("the session's \"scan\" entry is not a file name with its sha256")
    name, digest = entry["file"], entry["sha256"].lower()
    if (not name.endswith(SIDECAR_SUFFIX) or Path(name).name != name or "/" in name
            or "\\" in name or "\0" in name or name.startswith(".")):
        raise SidecarError(f"the saved scan {name[:80]!r} is not a file name beside the session "
                           f"(a plain NAME{SIDECAR_SUFFIX}): not read")
    path = folder / name
    if os.path.islink(path):  # the file itself, written beside the session, or nothing
        raise SidecarError(f"the saved scan {name} is a symbolic link: not read "
                           "(save the session again to write it beside the session)")
    raw = read_regular(path, MAX_SIDECAR_BYTES, "the saved scan", SidecarError)
    if hashlib.sha256(raw).hexdigest() != digest:
        raise SidecarError(f"the saved scan {name} was changed after the session was saved "
                           "(its SHA-256 differs): not shown; run the scan again")
    try:
        data = json.loads(raw.decode("utf-8"))
    except (ValueError, RecursionError) as exc:  # not UTF-8, broken JSON, nested without end
        raise SidecarError(f"the saved scan {name} is not readable JSON: not shown") from exc
    if _depth(data) > MAX_SIDECAR_DEPTH:
        raise SidecarError(f"the saved scan {name} nests more than {MAX_SIDECAR_DEPTH} levels: "
                           "not shown")
    try:
        result = scan_from_data(data)
    except ScanDataError as exc:
        raise SidecarError(f"the saved scan {name} is damaged ({exc}): not shown") from exc
    unit = data.get("unit")
    return SavedScan(result, unit if isinstance(unit, str) and len(unit) <= MAX_UNIT_CHARS else "")
