"""Opening files a person names, safely: regular files only, read with a bound.

A name such as ``s.hookscope.json`` or ``x.npy`` may be a FIFO (opening it
blocks until a writer comes, forever), a directory, a socket, a device, or a
symlink to ``/dev/zero`` or ``/dev/urandom`` (``st_size`` 0, endless data).
:func:`open_regular` opens without blocking (``O_NONBLOCK``), then asks the
*opened* descriptor what it is (``fstat``, so the answer cannot change between
the check and the read) and refuses anything but a regular file, with a
message that says what the name is instead. :func:`read_regular` also refuses
a file larger than a limit and never reads past it, in case the file grows.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import BinaryIO

from .errors import HookscopeError, InputError
from .read_files import note_read
from .user_text import shown

_KINDS = ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO (named pipe)"),
          (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"))


def kind_of(mode: int) -> str:
    """What a file of ``st_mode`` ``mode`` is, in words (``"a FIFO (named pipe)"``)."""
    return next((words for test, words in _KINDS if test(mode)), "not a regular file")


def open_regular(path: str | Path, what: str = "file",
                 error: type[HookscopeError] = InputError, *, own: bool = False) -> BinaryIO:
    """``path`` opened for binary reading, or ``error`` when it is missing or not a regular file.

    ``what`` names the file in messages (``"input file"``, ``"labels file"``).
    Opening never blocks, even on a FIFO with no writer. The file is recorded as read
    (:func:`~.read_files.note_read`: no output of this command may replace it) unless
    ``own``: Hookscope's own state that it reads to rewrite (the trust store).
    """
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(os.fspath(path), flags)
    except FileNotFoundError as exc:
        raise error(f"{what} {shown(path)} does not exist") from exc
    except (OSError, ValueError) as exc:  # no permission, a NUL byte, a name too long
        reason = getattr(exc, "strerror", None) or str(exc)
        raise error(f"cannot open {what} {shown(path)}: {reason}") from exc
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise error(f"{what} {shown(path)} is {kind_of(mode)}, not a regular file: give the "
                        "file itself (Hookscope does not read from pipes, devices or folders)")
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)  # a regular file: ordinary reads from here on
        if not own:
            note_read(path, what, os.fstat(fd))
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_regular(path: str | Path, limit: int, what: str = "file",
                 error: type[HookscopeError] = InputError, *, own: bool = False) -> bytes:
    """The bytes of the regular file ``path``, refused (``error``) when it holds more than ``limit``
    (``own``: see :func:`open_regular`)."""
    with open_regular(path, what, error, own=own) as f:
        size = os.fstat(f.fileno()).st_size
        data = f.read(limit + 1) if size <= limit else b""
        if size > limit or len(data) > limit:
            raise error(f"{what} {shown(path)} is {max(size, len(data)):,} bytes or more, above the "
                        f"{limit:,} bytes such a file may hold: check that it is the right file")
    return data


def check_regular(path: str | Path, what: str = "file",
                  error: type[HookscopeError] = InputError) -> None:
    """Refuse ``path`` unless it is a regular file (for readers that open it by name themselves)."""
    open_regular(path, what, error).close()
