"""Shared test configuration: headless Qt and a private settings folder.

Both must be set before Qt loads, hence at import time of this file.
"""

import os
import tempfile

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
# QSettings (recent models) must not write into the user's real config folder.
os.environ["XDG_CONFIG_HOME"] = tempfile.mkdtemp(prefix="hookscope-test-config-")

import pytest  # noqa: E402

# PySide6 6.12.0 on Python 3.11 under-counts None's references on every void call;
# a long test session would abort with "none_dealloc" (see hookscope.app.qt_compat).
from hookscope.app.qt_compat import guard_none_refcount  # noqa: E402

guard_none_refcount()


@pytest.fixture
def make_window(qtbot):
    """``make_window(argv)`` -> a shown MainWindow built like ``hookscope ARGV``;
    its worker thread is shut down at teardown."""
    from PySide6.QtCore import QSettings

    from hookscope.app import create_window

    made = []

    def make(argv: list[str] | None = None):
        # Each test starts from no remembered geometry or dock layout (a dock one test
        # hid must not be hidden in the next test's window).
        QSettings("Hookscope", "Hookscope").remove("window")
        win = create_window(list(argv or []))
        qtbot.addWidget(win)
        win.resize(1200, 800)
        win.show()
        made.append(win)
        return win

    yield make
    for win in made:
        win.shutdown()
        assert not win.worker.is_running


@pytest.fixture
def window(make_window, qtbot):
    """The default window (demo:clamp as exercise 1) after its first result arrived."""
    win = make_window([])
    qtbot.waitUntil(lambda: win.last_result is not None and win.is_idle(), timeout=30_000)
    return win
