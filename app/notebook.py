"""``explore(model, inputs)``: the window on a model that lives in this Python session.

napari's convention, which notebook users know: from a script the call shows
the window and returns when it is closed; in IPython with Qt's event loop
integrated (``%gui qt``) it returns at once and the window stays responsive
while cells run. The returned :class:`~hookscope.core.Session` is the one the
window edits::

    from hookscope.app import explore
    s = explore(model, x)                 # the window opens on model itself
    s.intervene("layer1", Clamp(0, 1))    # the tree and plots follow
    r = s.run(); r                         # the result shows in the window and the notebook

The module is used in place (no copy), on its own device, and keeps its own
hooks (:mod:`hookscope.core.model.live_model`). In IPython without ``%gui qt``,
the integration is switched on first (as ``%gui qt`` would) when it can be.
"""

from __future__ import annotations

import gc
import sys
import weakref
from typing import Any

from hookscope.core import Session

#: Windows opened by :func:`explore` and not closed yet: a notebook may drop the
#: returned session, and the window must stay until the person closes it.
_OPEN: list[Any] = []


#: pyqtgraph's collector while any of those windows is open, and whether gc was on before.
_collector: list[Any] = []


def _collect_on_gui_thread() -> None:
    """While an explore() window is open, garbage is collected on the GUI thread only, on a
    timer, as the application does (app/launch.py): a kernel's own threads (IOPub, history)
    allocate too, and a collection there could destroy a Qt object off the GUI thread.
    Started before the first job, so the runner finds automatic collection off and leaves
    it so (core/session/runner.py ``no_automatic_gc``)."""
    if not _collector:
        from pyqtgraph.util.garbage_collector import GarbageCollector

        was_enabled = gc.isenabled()
        _collector.extend([GarbageCollector(interval=1.0), was_enabled])


def _release_collector() -> None:
    """The last explore() window closed: automatic collection as it was before."""
    if _collector and not _OPEN:
        collector, was_enabled = _collector
        collector.timer.stop()
        _collector.clear()
        if was_enabled:
            gc.enable()


def _shell() -> Any:
    """The running IPython shell, or ``None`` (IPython is not imported here unless it runs)."""
    ipython = sys.modules.get("IPython")
    return ipython.get_ipython() if ipython is not None else None


def qt_loop_active(shell: Any) -> bool:
    """Whether IPython runs Qt's event loop between cells (``%gui qt`` was given)."""
    return shell is not None and str(getattr(shell, "active_eventloop", "") or "").startswith("qt")


def _enable_qt_loop(shell: Any) -> bool:
    """Switch IPython's Qt integration on, as ``%gui qt`` would; whether it is on."""
    if shell is None:
        return False
    if not qt_loop_active(shell):
        try:
            shell.enable_gui("qt")
        except Exception:  # noqa: BLE001 - an old IPython or another GUI's loop: block instead
            return False
    return qt_loop_active(shell)


def interactive_prompt() -> bool:
    """Whether Python's own prompt runs (``python -i``, the plain REPL): there Qt's event
    loop turns while the prompt waits for a line (PySide6's input hook), as IPython's
    ``%gui qt`` does between cells, so the window lives beside the prompt."""
    return hasattr(sys, "ps1") or bool(sys.flags.interactive)


def _application() -> Any:
    from PySide6.QtWidgets import QApplication


    app = QApplication.instance() or QApplication([sys.argv[0] if sys.argv else "hookscope"])
    app.setApplicationName("Hookscope")
    app.setOrganizationName("Hookscope")
    return app


def open_window(model: Any, inputs: Any = None, *, tokenizer: Any = None,
                labels: Any = None) -> Any:
    """The main window on ``model`` (shown, loading on the runner's thread); needs a
    QApplication. :func:`explore` without the event loop, for embedding and tests."""
    from .main_window import MainWindow

    _collect_on_gui_thread()
    win = MainWindow()
    win.status.show_busy(True)
    try:
        win.session.open_module(model, inputs, tokenizer=tokenizer, labels=labels)
    except BaseException:
        win.shutdown()
        win.deleteLater()
        _release_collector()
        raise
    _OPEN.append(win)
    ref = weakref.ref(win)  # the connection must not keep the window (and the model) alive

    def closed() -> None:
        w = ref()
        if w is not None and w in _OPEN:
            _OPEN.remove(w)
            w.deleteLater()  # closed for good: its session stays readable, the window goes
            _release_collector()

    win.windowClosed.connect(closed)
    win.resize(1400, 900)
    win.show()
    win.raise_()
    return win


def _wait_closed(win: Any) -> None:
    """Run Qt's event loop until ``win`` is closed, and until it is deleted: a script goes on
    (and ends) without an event loop, and a window left to a later one outlives its app."""
    from PySide6.QtCore import QCoreApplication, QEvent, QEventLoop

    if not win.isHidden():
        loop = QEventLoop()
        win.windowClosed.connect(loop.quit)
        loop.exec()
    QCoreApplication.sendPostedEvents(None, QEvent.Type.DeferredDelete)


def explore(model: Any, inputs: Any = None, *, tokenizer: Any = None, labels: Any = None,
            block: bool | None = None) -> Session:
    """Open Hookscope's window on ``model``, an ``nn.Module`` of this Python session.

    Parameters
    ----------
    model : torch.nn.Module
        Used in place: not copied, kept on its device; its own hooks stay.
    inputs : optional
        What a run feeds it: a tensor, a tuple of positional inputs, a dict
        of keyword inputs, or a prompt string when ``tokenizer`` is given.
    tokenizer : optional
        A Hugging Face tokenizer (or a TextCodec): the output reads as next
        tokens, and ``text:...`` inputs are tokenized.
    labels : optional
        Class names (a list, or a labels file): the output reads as classes.
    block : bool, optional
        Wait until the window is closed. By default only in a script: in
        IPython Qt's event loop runs between cells (``%gui qt``, switched on
        here if it was not), and at Python's own prompt (``python -i``) while
        it waits for a line, so there this returns at once.

    Returns
    -------
    Session
        The session the window edits: ``s.plan``, ``s.capture(...)``,
        ``s.intervene(...)``, ``s.run()``, ``s.last_result``. Once the window
        is closed it holds the last plan and result but runs no more.
    """
    shell = _shell()
    app = _application()  # PySide6 is imported before IPython picks a Qt binding
    if block is None:
        block = not (_enable_qt_loop(shell) or interactive_prompt())
    win = open_window(model, inputs, tokenizer=tokenizer, labels=labels)
    session = win.session
    if block:
        _wait_closed(win)
    else:
        app.processEvents()
    return session
