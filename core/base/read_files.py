"""The files one command or one session reads, so that no output ever replaces one of them.

A :class:`ReadFiles` is owned by whoever runs the work (the CLI makes one per
command, a :class:`~hookscope.core.Session` one for its life). It holds each
file by identity (device and inode, following symlinks), so a symlink, a hard
link or another spelling of a read file is that file, and each folder read as
a whole (a model folder, an SAE folder, an input folder), so that an existing
file inside it counts too.

Files get in two ways:

* *as they are opened*: :func:`~.regular_file.open_regular` (which every
  reader of a named file goes through: inputs, weights, vectors, prompt sets,
  SAE files, labels, session files, sidecars) calls :func:`note_read`, which
  records into the registry that is :meth:`ReadFiles.recording` in the
  current thread (none: nothing is recorded);
* *declared* before the work starts (:meth:`ReadFiles.add`), for files read
  later (a patch source read in the forward, an input set streamed by a scan).

:meth:`ReadFiles.refuse` raises a :class:`HookscopeError` naming the output
and the input before anything is written; :func:`~.atomic_write.atomic_write`
asks the recording registry too, so no write anywhere replaces a file read.
"""

from __future__ import annotations

import os
import stat
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Any, Iterable, Iterator

from .errors import HookscopeError
from .user_text import shown, user_path

Identity = tuple[int, int]

#: the registry the current thread's openers record into (set by :meth:`ReadFiles.recording`)
_RECORDING: ContextVar["ReadFiles | None"] = ContextVar("hookscope_read_files", default=None)


class ReadFiles:
    """Files and folders read, by identity, each with what it is in words and how it was named."""

    def __init__(self, reader: str = "this command") -> None:
        self.reader = reader
        self._files: dict[Identity, tuple[str, Path]] = {}
        self._folders: dict[Identity, tuple[str, Path]] = {}
        #: parent folder -> whether a recorded folder holds it (a scan of a million images
        #: in a recorded input folder stores the folder once, not each image)
        self._covered: dict[str, bool] = {}

    # -- filling ---------------------------------------------------------------------------
    def add(self, what: str, path: Any) -> None:
        """Count ``path`` (a file or a folder; missing: ignored) as read, as ``what``
        ("the input file"). A name given here replaces the opener's words for the file."""
        self._put(what, path, replace=True)

    def opened(self, what: str, path: Any, st: os.stat_result | None = None) -> None:
        """Record a file an opener opened (``st``: its ``fstat``), unless already named or
        inside a recorded folder (which counts it already)."""
        if isinstance(path, (str, Path)) and self._folders and self._in_folder(user_path(path)):
            return
        self._put(what, path, replace=False, st=st)

    def _in_folder(self, path: Path) -> bool:
        # the real path: a symlink in the folder to a file elsewhere leaves that file unheld
        parent = os.path.dirname(os.path.realpath(path))
        hit = self._covered.get(parent)
        if hit is None:
            ids = (_stat(Path(q)) for q in (parent, *map(str, Path(parent).parents)))
            hit = any(st is not None and (st.st_dev, st.st_ino) in self._folders for st in ids)
            self._covered[parent] = hit
        return hit

    def _put(self, what: str, path: Any, replace: bool, st: os.stat_result | None = None) -> None:
        if not isinstance(path, (str, Path)) or not str(path).strip():
            return
        p = user_path(path)
        st = st or _stat(p)
        if st is None:
            return
        table = self._files
        if stat.S_ISDIR(st.st_mode):  # a folder read as a whole: an input set, a model folder
            table, what = self._folders, what.removesuffix(" file") + (
                " folder" if what.endswith(" file") else "")
            self._covered.clear()  # a new folder may hold parents looked up before
        key = (st.st_dev, st.st_ino)
        if replace or key not in table:
            table[key] = (what, p)

    def update(self, other: "ReadFiles") -> None:
        """Add what ``other`` holds (its names kept where this one has none)."""
        for key, value in other._files.items():
            self._files.setdefault(key, value)
        for key, value in other._folders.items():
            self._folders.setdefault(key, value)
        self._covered.clear()

    @contextmanager
    def recording(self) -> Iterator["ReadFiles"]:
        """While inside, files opened in this thread (:func:`note_read`) are recorded here."""
        token = _RECORDING.set(self)
        try:
            yield self
        finally:
            _RECORDING.reset(token)

    # -- asking ----------------------------------------------------------------------------
    def __iter__(self) -> Iterator[tuple[str, Path]]:
        yield from self._files.values()
        yield from self._folders.values()

    def __len__(self) -> int:
        return len(self._files) + len(self._folders)

    def clash(self, target: Any) -> tuple[str, Path] | None:
        """``(what, path)`` of the read file ``target`` is, or lies in a read folder on."""
        p = user_path(str(target))
        st = _stat(p)
        if st is None:
            return None
        if (st.st_dev, st.st_ino) in self._files:
            return self._files[(st.st_dev, st.st_ino)]
        if stat.S_ISDIR(st.st_mode) or not self._folders:
            return self._folders.get((st.st_dev, st.st_ino))
        try:
            parents = p.resolve().parents
        except (OSError, RuntimeError, ValueError):
            return None
        for parent in parents:
            pst = _stat(parent)
            if pst is not None and (pst.st_dev, pst.st_ino) in self._folders:
                return self._folders[(pst.st_dev, pst.st_ino)]
        return None

    def refuse(self, outputs: Iterable[tuple[str, Any]], reader: str | None = None) -> None:
        """A :class:`HookscopeError` (nothing written) when an output ``(flag, path)`` is a file
        read, or an existing file inside a folder read."""
        for flag, out in outputs:
            if not out:
                continue
            found = self.clash(out)
            if found is not None:
                what, read = found
                raise HookscopeError(f"{flag} {shown(str(out))} would overwrite {what} "
                                     f"{reader or self.reader} reads ({shown(str(read))}); "
                                     "write to another file")


def note_read(path: Any, what: str, st: os.stat_result | None = None) -> None:
    """An opener read ``path`` (``what``: "input file"): recorded where a registry records."""
    reads = _RECORDING.get()
    if reads is not None:
        reads.opened(what if what.startswith(("the ", "a ", "an ")) else f"the {what}", path, st)


def recording_reads() -> ReadFiles | None:
    """The registry recording in this thread, if any."""
    return _RECORDING.get()


def refuse_replacing_reads(path: Any, flag: str = "the output") -> None:
    """Refuse writing ``path`` when the recording registry counts it as read."""
    reads = _RECORDING.get()
    if reads is not None:
        reads.refuse([(flag, path)])


def _stat(path: Path) -> os.stat_result | None:
    try:
        return os.stat(path)  # follows symlinks: a link to the input is the input
    except (OSError, ValueError):  # missing, or a name the OS cannot look up
        return None
