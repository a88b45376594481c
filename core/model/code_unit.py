"""The files a yes to a model's code covers, hashed together, and imports that read only them.

Importing a factory runs more than its own file: the ``__init__.py`` of every
package on its path, the modules it imports beside it, and, when a
``__pycache__`` holds a ``.pyc`` the import system believes up to date, that
bytecode instead of the source. The unit of trust is therefore a folder's
worth of importable files:

- ``path/to/model.py:factory``: every file the import system could load from the
  file's folder (``.py``, a sourceless ``.pyc`` beside its source name, extension
  modules), and from its subfolders that are importable package names;
- ``package.module:factory``: the same for the top-level package's folder
  (every ``__init__.py`` on the way down included); a top-level module outside
  any package: its folder, unless that is a site-packages folder (then the file);
- a pickle: the file.

:func:`unit_digest` hashes the sorted relative paths and their contents, within
:data:`MAX_FILES` files and :data:`MAX_BYTES` bytes (past either it refuses,
saying which folder and why, before reading a byte). ``__pycache__`` folders are
never part of the unit because :func:`source_only` makes the import read none:
for its duration ``sys.pycache_prefix`` is a private empty folder and nothing
is written, both restored afterwards.

What a unit cannot cover: code imported from other folders (site-packages:
torch, numpy, any installed library), files read by the code at run time.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.machinery
import os
import stat
import sys
import tempfile
from pathlib import Path
from typing import Iterator

from ..base.errors import SpecError
from ..base.regular_file import kind_of, open_regular
from ..base.user_text import shown

#: at most this many importable files in one unit
MAX_FILES = 5000
#: at most this many bytes in one unit, all files together
MAX_BYTES = 256 << 20
#: at most this many folder entries looked at while finding the unit's files
MAX_ENTRIES = 200_000
_READ_CHUNK = 1 << 20
_SKIP_DIRS = {"__pycache__"}


def _suffixes() -> tuple[str, ...]:
    """The file endings the import system loads (``.py``, ``.pyc``, extension modules)."""
    return tuple(importlib.machinery.all_suffixes())


def _refuse(root: Path, what: str) -> SpecError:
    return SpecError(f"the code in {shown(str(root))} cannot be checked: {what}. A yes covers "
                     "every file that could be imported from there, so nothing was run: move the "
                     "model's files into a folder of their own (on the command line, "
                     "--trust-code runs it without this check)")


def unit_files(root: Path, prefix: str = "") -> list[tuple[str, Path, int]]:
    """``(relative path, path, size)`` of every importable file under ``root``, sorted by
    relative path (each starting with ``prefix``); only folders whose names are
    importable are entered (``__pycache__`` never). Raises :class:`SpecError` past :data:`MAX_FILES`, :data:`MAX_BYTES` or
    :data:`MAX_ENTRIES`; a symlinked folder is followed once."""
    suffixes = _suffixes()
    found: list[tuple[str, Path, int]] = []
    total = entries = 0
    seen: set[tuple[int, int]] = set()
    todo = [(root, prefix)]
    while todo:
        folder, rel = todo.pop()
        try:
            st = folder.stat()
            if (st.st_dev, st.st_ino) in seen:
                continue
            seen.add((st.st_dev, st.st_ino))
            listing = os.scandir(folder)  # read entry by entry: a huge folder is never held whole
        except OSError:
            continue  # unreadable: the import system cannot load from it either
        with listing:
            for entry in listing:
                entries += 1
                if entries > MAX_ENTRIES:
                    raise _refuse(root, f"it has more than {MAX_ENTRIES:,} entries to look through")
                try:
                    st = entry.stat()  # follows a symlink, as the import system does
                except OSError:
                    continue
                name = entry.name
                if stat.S_ISDIR(st.st_mode):
                    if name.isidentifier() and name not in _SKIP_DIRS:
                        todo.append((Path(entry.path), rel + name + "/"))
                elif name.endswith(suffixes) and not stat.S_ISREG(st.st_mode):
                    raise _refuse(root, f"{shown(rel + name)} is {kind_of(st.st_mode)}, which an "
                                  "import would read from")
                elif name.endswith(suffixes):
                    found.append((rel + name, Path(entry.path), st.st_size))
                    total += st.st_size
                    if len(found) > MAX_FILES:
                        raise _refuse(root, f"it holds more than {MAX_FILES:,} Python files")
                    if total > MAX_BYTES:
                        raise _refuse(root, f"it holds more than {MAX_BYTES >> 20} MiB of "
                                      "Python files")
    found.sort(key=lambda f: f[0])
    return found


def unit_digest(root: Path, files: list[tuple[str, Path, int]]) -> str:
    """The sha256 of ``files`` together: each relative path, its length and its bytes, in
    order. A file that grew past its listed size or vanished is refused (it changed)."""
    h = hashlib.sha256()
    for rel, path, size in files:
        h.update(rel.encode("utf-8", "surrogateescape") + b"\0" + size.to_bytes(8, "little"))
        left = size
        with open_regular(path, "model file", SpecError) as fh:
            try:
                while left > 0 and (chunk := fh.read(min(_READ_CHUNK, left))):
                    h.update(chunk)
                    left -= len(chunk)
                extra = fh.read(1)
            except OSError as exc:
                raise SpecError(f"cannot read {shown(str(path))}: {exc.strerror or exc}") from exc
        if left or extra:
            raise SpecError(f"{shown(str(path))} changed while it was being checked (beside "
                            f"{shown(str(root))}); nothing was run: open it again")
    return h.hexdigest()


@contextlib.contextmanager
def source_only() -> Iterator[None]:
    """Imports in the body compile from the source and write no bytecode: a planted or
    stale ``__pycache__/*.pyc`` is never read. The two settings are the process's, so
    an import on another thread meanwhile also compiles from source (slower, never
    wrong); ``sys.pycache_prefix`` and ``sys.dont_write_bytecode`` are restored
    afterwards, whatever happens."""
    saved_prefix, saved_dont = sys.pycache_prefix, sys.dont_write_bytecode
    with tempfile.TemporaryDirectory(prefix="hookscope-no-bytecode-") as empty:
        sys.pycache_prefix = empty
        sys.dont_write_bytecode = True
        try:
            yield
        finally:
            sys.pycache_prefix = saved_prefix
            sys.dont_write_bytecode = saved_dont
