"""A text file read one line at a time without holding it: a sparse index of line starts.

Only every :data:`STRIDE`-th line's byte offset is kept (a 10-million-line file costs
about 80 KB of index), so reading line ``i`` seeks to the nearest indexed line and
reads forward at most ``STRIDE - 1`` lines. The file is checked once while indexing:
it must be a regular file (never a FIFO or a device: :func:`~..base.regular_file.open_regular`),
UTF-8 (the line and byte where it is not are named), and no line may be longer than
:data:`MAX_LINE_BYTES`. Blank lines are skipped, as a list of prompts means.
"""

from __future__ import annotations

import codecs
import os
from array import array
from pathlib import Path

from ..base.errors import InputError
from ..base.regular_file import open_regular
from ..base.user_text import shown

STRIDE = 256
MAX_LINE_BYTES = 1 << 20  # one prompt of a megabyte is a mistake, not a prompt
_CHUNK = 1 << 20


class LineIndex:
    """The non-blank lines of a UTF-8 text file, by number (from 0), read lazily."""

    def __init__(self, path: str | Path, what: str = "inputs file") -> None:
        self.path = Path(path)
        self.what = what
        self._starts = array("q")   # byte offset of every STRIDE-th non-blank line
        self.count = 0
        self._size = 0
        self._index()

    def _index(self) -> None:
        dec = codecs.getincrementaldecoder("utf-8")("strict")
        with open_regular(self.path, self.what) as f:
            self._size = os.fstat(f.fileno()).st_size
            pos = 0          # byte offset of the start of the current line
            line_no = 1      # the file's own line number, for messages
            line_len = 0
            blank = True
            while True:
                chunk = f.read(_CHUNK)
                if not chunk:
                    break
                try:
                    dec.decode(chunk)
                except UnicodeDecodeError as exc:
                    raise InputError(f"{self.what} {shown(self.path)} is not UTF-8 text (near "
                                     f"line {line_no}): save it as UTF-8, one input a line") from exc
                start = 0
                while start < len(chunk):
                    nl = chunk.find(b"\n", start)
                    end = len(chunk) if nl < 0 else nl
                    piece = chunk[start:end]
                    if blank and piece.strip():
                        blank = False
                        if self.count % STRIDE == 0:
                            self._starts.append(pos)
                        self.count += 1
                    line_len += end - start
                    if line_len > MAX_LINE_BYTES:
                        raise InputError(f"line {line_no} of {self.what} {shown(self.path)} is "
                                         f"longer than {MAX_LINE_BYTES:,} bytes: one input a line")
                    if nl < 0:
                        break
                    line_no += 1
                    pos += line_len + 1
                    line_len, blank = 0, True
                    start = nl + 1
            try:
                dec.decode(b"", final=True)
            except UnicodeDecodeError as exc:
                raise InputError(f"{self.what} {shown(self.path)} ends inside a UTF-8 character: "
                                 "save it as UTF-8") from exc

    def __len__(self) -> int:
        return self.count

    def line(self, i: int) -> str:
        """Non-blank line ``i`` (no line end, a leading BOM dropped)."""
        if not 0 <= i < self.count:
            raise IndexError(i)
        with open_regular(self.path, self.what) as f:
            if os.fstat(f.fileno()).st_size != self._size:
                raise InputError(f"{self.what} {shown(self.path)} changed while it was read: "
                                 "open it again")
            f.seek(self._starts[i // STRIDE])
            skip = i % STRIDE
            while True:
                raw = f.readline(MAX_LINE_BYTES + 2)
                if not raw:
                    raise InputError(f"{self.what} {shown(self.path)} changed while it was read: "
                                     "open it again")
                if not raw.strip():
                    continue
                if skip == 0:
                    text = raw.decode("utf-8").rstrip("\r\n")
                    return text.removeprefix("\ufeff")
                skip -= 1
