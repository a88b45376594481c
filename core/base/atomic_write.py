"""Writing a file whole or not at all.

Every file Hookscope writes (captures, session JSON, exported scripts) goes
through :func:`atomic_write`: the content is written to a temporary file in
the same folder, flushed, and renamed over the target with ``os.replace``,
which is atomic on one file system. A full disk, a file-size limit, a
permission problem or an interrupt leaves the old file (or no file) and no
half-written one, and the failure is a :class:`HookscopeError` naming the file
and the reason.

Files that belong together (a session file and the weights and input written
beside it) are written inside :func:`all_or_none`: each goes to its temporary
file as usual, but the renames wait until every one is written; a failure
removes every temporary, so no file of the group is replaced.
"""

from __future__ import annotations

import os
import tempfile
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Callable, Iterator

from .errors import HookscopeError
from .read_files import refuse_replacing_reads
from .user_text import is_dir


#: the (temporary, target) pairs of the :func:`all_or_none` group open in this thread
_GROUP: ContextVar[list[tuple[Path, Path]] | None] = ContextVar("hookscope_write_group",
                                                                default=None)


@contextmanager
def all_or_none() -> Iterator[None]:
    """Every :func:`atomic_write` inside lands only when the block ends without an error:
    all the files are renamed into place then; otherwise none is, and no temporary stays."""
    staged: list[tuple[Path, Path]] = []
    token = _GROUP.set(staged)
    try:
        yield
    except BaseException:
        for tmp, _ in staged:
            _remove(tmp)
        raise
    finally:
        _GROUP.reset(token)
    for i, (tmp, path) in enumerate(staged):
        try:
            os.replace(tmp, path)
        except OSError as exc:  # the folder went away or turned read-only between two renames
            for rest, _ in staged[i:]:
                _remove(rest)
            done = ", ".join(str(p) for _, p in staged[:i]) or "nothing"
            raise HookscopeError(f"cannot write {path}: {_reason(exc)}; written before it: "
                                 f"{done}") from exc


def atomic_write(path: str | Path, write: Callable[[Path], object]) -> Path:
    """Call ``write(tmp)`` to fill a temporary file beside ``path``, then rename it to ``path``.

    The temporary name keeps ``path``'s suffix, so writers that add one
    (``numpy.savez`` adds ``.npz``) write where they are told. A ``path`` that the
    registry recording in this thread counts as read is refused, nothing written
    (:mod:`.read_files`).
    """
    path = Path(path).expanduser()
    refuse_replacing_reads(path)
    if is_dir(path):  # the rename would fail only after the data was written
        raise HookscopeError(f"cannot write {path}: a folder has that name; nothing was written")
    folder = path.parent
    try:
        fd, tmp_name = tempfile.mkstemp(dir=folder, prefix=f".{path.stem[:60]}.",
                                        suffix=path.suffix or ".tmp")
        os.close(fd)
    except (OSError, ValueError) as exc:  # ValueError: a NUL in the name
        raise HookscopeError(f"cannot write {path}: {_reason(exc)} (in folder {folder})") from exc
    tmp = Path(tmp_name)
    try:
        write(tmp)
        with open(tmp, "rb+") as f:  # the data is on disk before the name points at it
            os.fsync(f.fileno())
        os.chmod(tmp, _mode_for(path))
        group = _GROUP.get()
        if group is not None:
            group.append((tmp, path))  # renamed when the whole group is written
        else:
            os.replace(tmp, path)
    except BaseException as exc:
        _remove(tmp)
        if isinstance(exc, Exception):  # OSError, or a writer's own error type (safetensors)
            raise HookscopeError(f"cannot write {path}: {_reason(exc)}; nothing was written") from exc
        raise  # KeyboardInterrupt: the partial file is gone, the interrupt goes on
    return path


def write_text(path: str | Path, text: str) -> Path:
    """``path.write_text(text)``, whole or not at all."""
    return atomic_write(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))


def write_bytes(path: str | Path, data: bytes) -> Path:
    return atomic_write(path, lambda tmp: tmp.write_bytes(data))


def _reason(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    text = str(exc).strip().splitlines()
    return text[0][:200] if text else type(exc).__name__


def _mode_for(path: Path) -> int:
    """The mode an ordinary ``open(path, "w")`` would give: the old file's, or 0666 & ~umask."""
    try:
        return path.stat().st_mode & 0o7777
    except OSError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask


def _remove(tmp: Path) -> None:
    try:
        tmp.unlink()
    except OSError:
        pass
