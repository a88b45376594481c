"""How far a long command is, on stderr: one helper for every command of the CLI.

Built on tqdm, the bar every PyTorch user already knows (training loops, ``datasets``,
``huggingface_hub``): on a terminal a bar with done/total, rate and ETA, rewritten in
place; not on a terminal (a pipe, CI, a log file) plain lines, the first after
:data:`LINE_EVERY_S` seconds and at most one every :data:`LINE_EVERY_S` after it (a
command that ends sooner says nothing); with ``--quiet`` nothing. Never on stdout,
so ``--json``/``--csv -`` output is the same with or without progress, and the same
computation runs either way (the counting below never changes what core computes).

The helper is fed by core's own progress callbacks, never the other way round (core
stays free of tqdm): ``progress(done, total)`` of a sweep (here, or its cells over a
Ray pool), ``progress(done, total, eta_s)`` of a scan (here, or its shards over a Ray
pool; tqdm's own ETA is shown), ``should_stop()`` of a generation or a comparison (one
call a token, or a layer call: :meth:`CommandProgress.stop_point` counts it and never
asks to stop), a session's ``RunProgress`` events (``hookscope diff``, which runs in a
:class:`~hookscope.core.Session`: its layer calls); :meth:`CommandProgress.step` for
anything else (the bench's rounds). A new long command needs one ``with`` and the
callback it already has::

    with command_progress("hookscope sweep", "cell", cells, err) as bar:
        res = sweep(..., progress=bar.advance_to)

Ctrl+C inside the ``with`` ends the bar and raises :class:`Interrupted`, whose message
says how far it got ("interrupted after 37/120 cells; nothing written"); the CLI's
entry point prints it and exits with status 130. "Nothing written" holds because every
command writes its files after its long step, each whole or not at all.
"""

from __future__ import annotations

import argparse
import functools
import io
import os
from types import TracebackType
from typing import Any, TextIO

#: Not on a terminal: seconds before the first line and between two lines.
LINE_EVERY_S = 5.0
#: On a terminal: the least time between two redraws of the bar.
REDRAW_EVERY_S = 0.1
#: A terminal that does not say its size is taken to be this many columns and rows.
UNKNOWN_WIDTH = (80, 24)
#: Not on a terminal there is no bar to draw: the numbers only.
LINE_FORMAT = ("{desc}: {n_fmt}/{total_fmt} {unit}s ({percentage:.0f}%) "
               "[{elapsed}<{remaining}, {rate_fmt}]")
LINE_FORMAT_NO_TOTAL = "{desc}: {n_fmt} {unit}s [{elapsed}, {rate_fmt}]"


class Interrupted(KeyboardInterrupt):
    """Ctrl+C during a long step; ``str()`` says what had been done."""


class _Silent(io.TextIOBase):
    """Where the notes and the progress of a ``--quiet`` command go."""

    def write(self, s: str) -> int:
        return len(s)

    def isatty(self) -> bool:
        return False


#: The stream of a ``--quiet`` command's talk: it says nothing.
SILENT: TextIO = _Silent()  # type: ignore[assignment]


def add_quiet_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("-q", "--quiet", action="store_true",
                   help="print no progress and no notes on stderr (errors still)")


def talk_stream(err: TextIO, quiet: bool) -> TextIO:
    """Where a command's notes and progress go: ``err``, or nowhere with ``--quiet``."""
    return SILENT if quiet else err


def is_terminal(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # no isatty, or a closed stream
        return False


def _knows_width(stream: Any) -> bool:
    """Whether the terminal says how wide it is (a fresh pseudo-terminal says 0 columns,
    and a bar fitted to 0 columns is no bar at all: :data:`UNKNOWN_WIDTH` then)."""
    try:
        return os.get_terminal_size(stream.fileno()).columns > 0
    except (AttributeError, OSError, ValueError):
        return False


class _Lines:
    """A file for tqdm off a terminal: each redraw (``\\r`` + text + padding) becomes one
    line of text; the bare newline tqdm ends with is dropped."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def write(self, s: str) -> int:
        text = s.replace("\r", "").rstrip()
        if text:
            self._stream.write(text + "\n")
        return len(s)

    def flush(self) -> None:
        self._stream.flush()


@functools.lru_cache(maxsize=1)
def _bar_class() -> Any:
    """tqdm's bar (imported on the first long step: ``hookscope run`` without one never
    loads it)."""
    from tqdm import tqdm

    class Bar(tqdm):  # type: ignore[misc, type-arg]
        monitor_interval = 0  # no monitor thread: the bar redraws when core reports, only then

    return Bar


class CommandProgress:
    """The progress of one long step: ``what`` (``"hookscope sweep"``) counted in
    ``unit`` (``"cell"``) out of ``total`` (``None``: not known yet), shown on ``err``
    (see the module docstring; ``err`` :data:`SILENT`: nothing shown, still counted).
    Use it as a context manager."""

    def __init__(self, what: str, unit: str, total: int | None, err: TextIO) -> None:
        self.what, self.unit = what, unit
        self.done, self.total = 0, total
        self._err = err
        self._bar: Any = None
        terminal = is_terminal(err)
        self._lines = not terminal  # lines of text, not a bar
        if err is SILENT:
            return
        Bar = _bar_class()
        common: dict[str, Any] = dict(total=total, desc=what, unit=unit)
        if terminal and _knows_width(err):
            common["dynamic_ncols"] = True  # a resized window gets a bar of its new width
        elif terminal:
            common.update(ncols=UNKNOWN_WIDTH[0], nrows=UNKNOWN_WIDTH[1])
        if terminal:  # the last picture of the bar stays on the screen
            self._bar = Bar(file=err, mininterval=REDRAW_EVERY_S, leave=True, **common)
        else:  # the last line is written by close(), once
            self._bar = Bar(file=_Lines(err), mininterval=LINE_EVERY_S, delay=LINE_EVERY_S,
                            bar_format=LINE_FORMAT if total else LINE_FORMAT_NO_TOTAL,
                            leave=False, **common)

    def advance_to(self, done: int, total: int | None = None, *_eta: Any) -> None:
        """Core's ``progress(done, total)`` (or ``(done, total, eta_s)``) callback."""
        if total is not None and total != self.total:
            self._set_total(total)
        self.step(done - self.done)

    def step(self, n: int = 1) -> None:
        self.done += n
        if self.total is not None and self.done > self.total:  # an estimate fell short
            self._set_total(self.done)
        if self._bar is not None:
            self._bar.update(n)

    def _set_total(self, total: int) -> None:
        self.total = total
        if self._bar is not None:
            self._bar.total = total
            if self._lines:
                self._bar.bar_format = LINE_FORMAT

    def note(self, text: str) -> None:
        """A line of talk while the bar runs: above the bar on a terminal (which is then
        drawn again), plainly off one."""
        if self._bar is not None and not self._lines:
            self._bar.write(text, file=self._err)
        else:
            print(text, file=self._err, flush=True)

    def stop_point(self) -> bool:
        """Core's ``should_stop()``: count one step (a token, a layer call); never stop."""
        self.step()
        return False

    def close(self) -> None:
        bar, self._bar = self._bar, None
        if bar is None:
            return
        # Off a terminal, a step that has said something ends with a line of where it
        # stopped, unless its last line already says so; one that has not stays silent.
        said = bar.last_print_t >= bar.start_t + bar.delay
        if self._lines and said and bar.last_print_n != bar.n:
            bar.refresh()
        bar.close()

    def summary(self) -> str:
        """How far it got, e.g. ``37/120 cells``."""
        total = "" if self.total is None else f"/{self.total}"
        return f"{self.done}{total} {self.unit}s"

    def __enter__(self) -> "CommandProgress":
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()
        if isinstance(exc, KeyboardInterrupt) and not isinstance(exc, Interrupted):
            raise Interrupted(f"interrupted after {self.summary()}; nothing written") from exc


def command_progress(what: str, unit: str, total: int | None, err: TextIO) -> CommandProgress:
    """The progress of a long step of a command; see :class:`CommandProgress`."""
    return CommandProgress(what, unit, total, err)
