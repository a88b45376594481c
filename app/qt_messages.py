"""Keeping the offscreen platform's notes off stderr while Hookscope draws without a window.

``--save-plots`` and ``--screenshot`` draw on Qt's offscreen platform, which
says "This plugin does not support propagateSizeHints()" (and the like) for
every window it cannot treat as a real one: nothing is wrong, but stderr of a
successful command should be empty. :func:`offscreen_notes_dropped` installs a
Qt message handler for the duration of a ``with`` block that drops exactly
those notes, and only on the offscreen platform; every other message goes on
to the handler that was installed before (pytest-qt's in tests) or, when there
was none, to stderr formatted as Qt would.
"""

from __future__ import annotations

import contextlib
import sys
from typing import Iterator

#: How the offscreen platform starts a note about a window-system feature it lacks.
OFFSCREEN_NOTE = "This plugin does not support"


@contextlib.contextmanager
def offscreen_notes_dropped() -> Iterator[None]:
    """Inside: the offscreen platform's "does not support" notes are dropped (see module)."""
    from PySide6.QtCore import qFormatLogMessage, qInstallMessageHandler
    from PySide6.QtGui import QGuiApplication

    if QGuiApplication.platformName() != "offscreen":
        yield
        return
    previous = None

    def handler(mode, context, message: str) -> None:
        if message.startswith(OFFSCREEN_NOTE):
            return
        if previous is not None:
            previous(mode, context, message)
        else:
            sys.stderr.write(qFormatLogMessage(mode, context, message) + "\n")

    previous = qInstallMessageHandler(handler)
    try:
        yield
    finally:
        qInstallMessageHandler(previous)
