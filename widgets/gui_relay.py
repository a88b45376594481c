"""Calls onto the GUI thread from any thread, safe however the window's objects come and go.

A background thread (the session's runner, the view worker, a script export) gives its
answers to the GUI thread through a queued signal. Two ways of doing that crash Qt:

- emitting on a QObject the GUI thread is destroying at that moment (a window closed while
  its view job still ran): a use-after-free inside ``QMetaObject::activate``;
- a thread holding the last reference to a widget (the panel a view job was for, a window
  in an export's closure): the widget is then destroyed on that thread.

So every such call goes through the one :class:`GuiRelay` of the application (a child of
the ``QCoreApplication``, never destroyed while it runs), and a thread holds no Qt object:
a :class:`Gate` is plain Python (a flag and the relay), and what must be called on the GUI
thread with the thread's answer is kept there, by number (:func:`keep`), the thread holding
only the number (a :class:`Kept`).
"""

from __future__ import annotations

import itertools
import threading
from typing import Any, Callable

from PySide6.QtCore import QCoreApplication, QObject, Qt, QThread, Signal, Slot
from shiboken6 import isValid


class GuiRelay(QObject):
    """Runs the functions handed to :meth:`call_soon` on the GUI thread, in order."""

    _call = Signal(object)   # emitted in any thread, received on the GUI thread

    def __init__(self, app: QCoreApplication) -> None:
        super().__init__(app)
        self.setObjectName("hookscopeGuiRelay")
        self._call.connect(self._run, Qt.ConnectionType.QueuedConnection)

    def call_soon(self, fn: Callable[[], Any]) -> None:
        """Any thread: run ``fn()`` on the GUI thread."""
        self._call.emit(fn)

    @Slot(object)
    def _run(self, fn: Callable[[], Any]) -> None:
        fn()


_relay: GuiRelay | None = None
_relay_lock = threading.Lock()


def gui_relay() -> GuiRelay:
    """The application's relay, made on first use; the first call must be on the GUI thread
    (a window's or a worker's constructor), with a ``QCoreApplication`` made."""
    global _relay
    with _relay_lock:
        if _relay is None or not isValid(_relay):
            app = QCoreApplication.instance()
            if app is None or QThread.currentThread() is not app.thread():
                raise RuntimeError("the GUI relay is made on the GUI thread, after the "
                                   "QApplication")
            _relay = GuiRelay(app)
        return _relay


class Gate:
    """A way onto the GUI thread that can be shut: :meth:`post` from any thread runs a
    function there while the gate is open, and never once :meth:`close` was called (on the
    GUI thread), whether the function was posted before or after. Plain Python, so a thread
    may hold it for as long as it likes."""

    def __init__(self) -> None:
        self._relay = gui_relay()
        self.open = True

    def post(self, fn: Callable[[], None]) -> None:
        """Any thread: run ``fn()`` on the GUI thread, unless the gate is shut by then."""
        if self.open:
            self._relay.call_soon(lambda: self._run(fn))

    def _run(self, fn: Callable[[], None]) -> None:
        if self.open:
            fn()

    def close(self) -> None:
        self.open = False


#: Functions kept for a thread's answer, by number; read and written on the GUI thread only.
_KEPT: dict[int, Callable[..., None]] = {}
_numbers = itertools.count(1)


class Kept:
    """What a thread holds of a function :func:`keep` kept on the GUI thread: its number.
    Calling it (any thread, once) runs the function there with the same arguments."""

    __slots__ = ("_number", "_relay")

    def __init__(self, number: int, relay: GuiRelay) -> None:
        self._number = number
        self._relay = relay

    def __call__(self, *args: Any) -> None:
        number = self._number
        self._relay.call_soon(lambda: _call_kept(number, args))


def keep(fn: Callable[..., None]) -> Kept:
    """GUI thread: keep ``fn`` here and return what a thread may call instead of it."""
    relay = gui_relay()
    number = next(_numbers)
    _KEPT[number] = fn
    return Kept(number, relay)


def _call_kept(number: int, args: tuple) -> None:
    fn = _KEPT.pop(number, None)
    if fn is not None:
        fn(*args)
