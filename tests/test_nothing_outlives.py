"""The suite's own check (tests/conftest.py) that no widget or QThread outlives a
test: it must see a leak when there is one."""

from __future__ import annotations

from conftest import _top_level_widgets, _started_threads, leaks
from PySide6.QtCore import QThread
from PySide6.QtWidgets import QLabel


def test_the_leak_check_sees_a_shown_widget_and_a_running_thread(qapp):
    widgets, threads = set(_top_level_widgets()), len(_started_threads)
    stray = QLabel("left behind")
    stray.setObjectName("stray")
    stray.show()
    worker = QThread()
    worker.start()
    try:
        found = leaks(widgets, threads)
        assert "widget QLabel('stray') outlived the test" in found
        assert "1 QThread(s) still running" in found
    finally:
        worker.quit()
        worker.wait()
    assert leaks(set(_top_level_widgets()), len(_started_threads)) == []
