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

import numpy as np

from ..base.errors import InputError
from ..base.regular_file import open_regular
from ..base.user_text import shown

STRIDE = 256
MAX_LINE_BYTES = 1 << 20  # one prompt of a megabyte is a mistake, not a prompt
_CHUNK = 1 << 18
#: what ``bytes.strip()`` removes: a line of only these is blank
_SPACE = np.frombuffer(b" \t\n\r\x0b\x0c", dtype=np.uint8)


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
            base = 0            # bytes before the current chunk
            line_start = 0      # byte offset where the unfinished line starts
            line_len = 0        # its bytes so far
            blank = True        # whether it is blank so far
            lines_seen = 0      # finished lines, blank ones too (for messages)
            while True:
                chunk = f.read(_CHUNK)
                if not chunk:
                    break
                try:
                    dec.decode(chunk)
                except UnicodeDecodeError as exc:
                    at = lines_seen + chunk[:max(0, exc.start)].count(b"\n") + 1
                    raise InputError(f"{self.what} {shown(self.path)} is not UTF-8 text (line "
                                     f"{at}): save it as UTF-8, one input a line") from exc
                arr = np.frombuffer(chunk, dtype=np.uint8)
                nl = np.flatnonzero(arr == 10)
                solid = np.concatenate([[0], np.cumsum(~np.isin(arr, _SPACE), dtype=np.int64)])
                starts = np.concatenate([[0], nl + 1])
                ends = np.concatenate([nl, [len(arr)]])
                filled = solid[ends] - solid[starts] > 0
                lengths = ends - starts
                lengths[0] += line_len
                if int(lengths.max()) > MAX_LINE_BYTES:
                    at = lines_seen + 1 + int(np.argmax(lengths > MAX_LINE_BYTES))
                    raise InputError(f"line {at} of {self.what} {shown(self.path)} is longer "
                                     f"than {MAX_LINE_BYTES:,} bytes: one input a line")
                filled[0] = filled[0] or not blank
                line_starts = base + starts
                line_starts[0] = line_start
                done = len(nl)  # pieces 0..done-1 end with a newline: finished lines
                self._add(line_starts[:done][filled[:done]])
                lines_seen += done
                line_start, line_len = int(line_starts[done]), int(lengths[done])
                blank = not bool(filled[done])
                base += len(chunk)
            try:
                dec.decode(b"", final=True)
            except UnicodeDecodeError as exc:
                raise InputError(f"{self.what} {shown(self.path)} ends inside a UTF-8 character: "
                                 "save it as UTF-8") from exc
            if not blank:
                self._add(np.array([line_start], dtype=np.int64))

    def _add(self, starts: np.ndarray) -> None:
        """Count these non-blank lines' starts; keep every STRIDE-th."""
        if not len(starts):
            return
        ordinal = self.count + np.arange(len(starts))
        self._starts.extend(int(v) for v in starts[ordinal % STRIDE == 0])
        self.count += len(starts)

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
