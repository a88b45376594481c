"""Code the person chose to always trust: path, folder and sha256, kept in their config folder.

The window's "Always trust these files" adds the code here; the next open of a
session, recent entry or dropped file naming the same file *at the same hash*
runs it without asking. The hash covers every file its import could run
(:mod:`.code_unit`): an edit to any of them gives another hash and is asked
about again. The store lives in ``$HOOKSCOPE_CONFIG_DIR``, else
``$XDG_CONFIG_HOME/hookscope``, else ``~/.config/hookscope``, as
``trusted-code.json``, written whole or not at all. A damaged or foreign store
trusts nothing (it is never a reason to run code) and is replaced at the next
"Always". The command line never reads it: there ``--trust-code`` says yes.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from ..base.atomic_write import write_text
from .code_trust import CodeToRun
from ..base.errors import HookscopeError
from ..base.regular_file import read_regular

FILE_NAME = "trusted-code.json"
FORMAT = "hookscope-trusted-code"
MAX_BYTES = 1 << 20
MAX_ENTRIES = 1000


def config_dir() -> Path:
    """Hookscope's config folder (not created here)."""
    own = os.environ.get("HOOKSCOPE_CONFIG_DIR")
    if own:
        return Path(own).expanduser()
    xdg = os.environ.get("XDG_CONFIG_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".config"
    return base / "hookscope"


class TrustStore:
    """The always-trusted files (see the module's docstring)."""

    def __init__(self, path: str | Path | None = None) -> None:
        self.path = Path(path) if path is not None else config_dir() / FILE_NAME

    def trusts(self, code: CodeToRun) -> bool:
        """Whether ``code``'s file, at this very hash, was marked "Always trust"."""
        return any(e.get("path") == code.origin and e.get("sha256") == code.sha256
                   and e.get("kind") == code.kind and e.get("folder", "") == code.folder
                   and e.get("count", 1) == code.count for e in self._entries())

    def add(self, code: CodeToRun) -> None:
        """Always trust ``code``'s file at its current hash (an older hash of it is dropped)."""
        entries = [e for e in self._entries() if e.get("path") != code.origin]
        entries.append({"path": code.origin, "sha256": code.sha256, "kind": code.kind,
                        "target": code.target, "folder": code.folder, "count": code.count})
        text = json.dumps({"format": FORMAT, "version": 1, "files": entries[-MAX_ENTRIES:]},
                          indent=1) + "\n"
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        except OSError as exc:
            raise HookscopeError(f"cannot remember the trusted file in {self.path.parent}: "
                                 f"{exc.strerror or exc}") from exc
        write_text(self.path, text)

    def _entries(self) -> list[dict]:
        try:
            data = json.loads(read_regular(self.path, MAX_BYTES, "trust store", own=True).decode("utf-8"))
        except (HookscopeError, ValueError, RecursionError):  # absent, not a file, too big, not JSON
            return []
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            return []
        files = data.get("files")
        if not isinstance(files, list):
            return []
        return [e for e in files if isinstance(e, dict)
                and all(isinstance(e.get(k), str) for k in ("path", "sha256", "kind"))]

