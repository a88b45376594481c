"""Shared test configuration: headless Qt, one torch thread and a private settings folder.

All must be set before Qt and torch load, hence at import time of this file.
"""

import os
import tempfile

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
# One torch thread in each test process (xdist's workers, the CLI and kernels they start):
# make test runs a worker per core, and torch's default of an OpenMP thread per core in each
# oversubscribes the machine, its threads spinning against each other's (a quarter of the
# suite's CPU time on two cores, measured). Tests of threading set their own counts; export
# OMP_NUM_THREADS to run the suite on torch's default instead.
os.environ.setdefault("OMP_NUM_THREADS", "1")
# QSettings (recent models) must not write into the user's real config folder.
os.environ["XDG_CONFIG_HOME"] = tempfile.mkdtemp(prefix="hookscope-test-config-")

import pytest  # noqa: E402



@pytest.fixture(autouse=True)
def trust_store_dir(tmp_path_factory, monkeypatch):
    """The files a test marks "Always trust" go to a folder of its own (never the real
    config, never another test's): ``$HOOKSCOPE_CONFIG_DIR``, which CLI subprocesses inherit."""
    folder = tmp_path_factory.mktemp("hookscope-config")
    monkeypatch.setenv("HOOKSCOPE_CONFIG_DIR", str(folder))
    return folder


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


# -- nothing outlives its test: widgets and threads ------------------------------
# Every QThread a test starts is noted here, and must have stopped when the test's
# fixtures are torn down; every top-level widget a test creates must be gone.
import gc  # noqa: E402
import weakref  # noqa: E402

from PySide6.QtCore import QCoreApplication, QEvent, QThread  # noqa: E402

_started_threads: list = []
_qthread_start = QThread.start


def _tracked_start(self, *args, **kwargs):
    _started_threads.append(weakref.ref(self))
    return _qthread_start(self, *args, **kwargs)


QThread.start = _tracked_start


def _top_level_widgets() -> dict[int, object]:
    from PySide6.QtWidgets import QApplication, QMenu
    from shiboken6 import getCppPointer, isValid

    app = QApplication.instance()
    if app is None:
        return {}
    # pyqtgraph makes hidden parentless helpers (a plot's menus and control panels) that
    # die with the plot's Python object, not with its widget: only widgets a person could
    # see, and our own, count.
    return {getCppPointer(w)[0]: w for w in app.topLevelWidgets()
            if isValid(w) and not isinstance(w, QMenu)
            and (w.isVisible() or type(w).__module__.startswith("hookscope"))}


# Collections only on the main (GUI) thread, between tests, as the app does on its
# timer (app/launch.py): an automatic one can run in a worker thread that allocates,
# and a Qt object in a cycle destroyed there crashes Qt (seen twice in 7 suite runs:
# a segfault in libQt6Widgets, after which the run hung).
gc.disable()
_GC_THRESHOLDS = gc.get_threshold()


def _collect_as_due() -> None:
    """gc's own generational schedule, run here instead of wherever it falls due."""
    l0, l1, l2 = gc.get_count()
    if l0 > _GC_THRESHOLDS[0]:
        gc.collect(0)
        if l1 > _GC_THRESHOLDS[1]:
            gc.collect(1)
            if l2 > _GC_THRESHOLDS[2]:
                gc.collect(2)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_setup(item):
    item._widgets_before = set(_top_level_widgets())
    item._threads_before = len(_started_threads)
    yield


def leaks(widgets_before: set, threads_before: int) -> list[str]:
    """What outlived a test: QThreads it started that still run, top-level widgets
    it made that still exist (after deferred deletes). Cleans them up."""
    running = [t() for t in _started_threads[threads_before:]]
    running = [t for t in running if t is not None and t.isRunning()]
    del _started_threads[threads_before:]
    def left_over() -> list:
        if QCoreApplication.instance() is not None:
            QCoreApplication.sendPostedEvents(None, QEvent.Type.DeferredDelete)
        return [w for key, w in _top_level_widgets().items() if key not in widgets_before]

    left = left_over()
    if left:
        # A widget whose Python wrapper sits in a reference cycle goes only with a
        # collection. A full gc.collect() costs 0.6-0.9 s per test once torch,
        # transformers and ray are imported (480 of the suite's 790 s were these
        # teardowns), so it runs only when something is left over.
        left.clear()  # no reference of ours may keep a widget alive through the collection
        gc.collect()
        left = left_over()
    out = [f"{len(running)} QThread(s) still running"] if running else []
    out += [f"widget {type(w).__name__}({w.objectName()!r}) outlived the test" for w in left]
    for w in left:   # clean up, so one leak does not fail every test after it
        w.close()
        w.deleteLater()
    return out


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item, nextitem):
    yield   # the test's fixtures (qtbot's widgets, windows and their workers) are torn down
    # Code that turns the collector back on (a test's `finally: gc.enable()`, a library
    # restoring what it thinks was there) would let every later test in this worker
    # collect on a background thread: off again, and this test fails for it.
    collector_left_on = gc.isenabled()
    gc.disable()
    _collect_as_due()
    found = leaks(getattr(item, "_widgets_before", set()), getattr(item, "_threads_before", 0))
    if collector_left_on:
        found.append("the garbage collector was left on (collections would then run on "
                     "background threads, where a Qt object in a cycle crashes Qt)")
    assert not found, f"{item.nodeid}: " + "; ".join(found)


def pytest_collection_modifyitems(config, items):
    # Under pytest-xdist (make test runs it on every CPU) the tests that start a
    # local Ray instance share one worker, one after the other: two Ray heads at
    # once would compete for the machine and its ports.
    for item in items:
        if item.get_closest_marker("ray") is not None:
            item.add_marker(pytest.mark.xdist_group("ray"))
