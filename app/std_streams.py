"""stdout is data, stderr is talk, for every command of the CLI.

While a command runs (:func:`talk_on_stderr`), ``sys.stdout`` is stderr: whatever a
model's code, a library or a warning prints goes where the notes and the progress
go, and the command writes its data (a table, ``--json``, ``--csv -``, a screenshot's
path) to :func:`data_stream`, the real stdout. So ``hookscope sweep ... --json | jq``
reads one JSON document whatever the model printed on its way. Help and ``--version``
are data too: asked for, they go to stdout.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from typing import Iterator, TextIO

from hookscope.core import PlanError

_data: list[TextIO] = []


def data_stream() -> TextIO:
    """Where a command writes its data: stdout as it was when the command began."""
    return _data[-1] if _data else sys.stdout


@contextlib.contextmanager
def talk_on_stderr() -> Iterator[TextIO]:
    """Run the body with ``sys.stdout`` sent to stderr; yields the data stream."""
    data = sys.stdout
    _data.append(data)
    try:
        with contextlib.redirect_stdout(sys.stderr):
            yield data
    finally:
        _data.pop()


def csv_to_stdout(ns: argparse.Namespace) -> bool:
    """Whether ``--csv -`` asks for the CSV on stdout (instead of the table); if so,
    ``ns.csv`` is cleared, as no file is written. ``--json`` with it is refused: one
    stdout cannot carry two documents."""
    if ns.csv != "-":
        return False
    if ns.json:
        raise PlanError("--csv - and --json both write to stdout: give --csv a file name, "
                        "or drop one of them")
    ns.csv = None
    return True
