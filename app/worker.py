"""The thin Qt relay between the session's runner and the GUI thread.

The runner (``hookscope.core.session.runner``) loads models and runs forwards in its
own thread and answers there. :class:`ForwardWorker` owns the window's
:class:`~hookscope.core.Session` and gives it a ``post`` that queues each
answer onto the GUI thread (a :class:`~hookscope.widgets.gui_relay.Gate`: the runner's
thread holds no Qt object, and emits on nothing a closing window destroys): the one
place results arrive. The session then applies the answer and tells its subscribers
(the widgets), all on the GUI thread. After :meth:`ForwardWorker.shutdown` nothing
is delivered any more. There is no QThread: closing never waits on, or
aborts, a thread in the middle of a forward.
"""

from __future__ import annotations

from typing import Callable

from PySide6.QtCore import QObject

from hookscope.core import Session
from hookscope.core.session import LocalRunner, QueueRunner
from hookscope.widgets.gui_relay import Gate

#: How long closing waits for the run in flight to reach its next layer.
CLOSE_WAIT_S = 1.0


class ForwardWorker(QObject):
    """The session and its runner, seen from the GUI thread."""

    def __init__(self, parent: QObject | None = None,
                 runner_factory: Callable = LocalRunner) -> None:
        super().__init__(parent)
        #: the way onto the GUI thread for the runner's answers (and a script export's)
        self.gate = Gate()
        self.session = Session(runner_factory, post=self.gate.post)
        runner = self.session.runner
        assert runner is not None  # a session made with a runner factory has its runner
        self._counts = runner.counts  # the runner's own tally, updated in place
        if isinstance(runner, QueueRunner):   # local, Ray, accelerate: all queue runners
            runner.make_display = True   # results come display-ready, made in the runner's thread

    def shutdown(self, timeout_s: float = CLOSE_WAIT_S) -> bool:
        """Stop delivering, stop the run in flight at its next layer and wait at most
        ``timeout_s`` for it; idempotent. Whether the runner's thread ended in time."""
        self.gate.close()
        return self.session.close(timeout_s)

    # -- state for the status bar, tests and benchmarks --------------------------
    @property
    def runs_done(self) -> int:
        return self._counts.runs_done

    @property
    def runs_failed(self) -> int:
        return self._counts.runs_failed

    @property
    def runs_dropped(self) -> int:
        return self._counts.dropped

    @property
    def busy(self) -> bool:
        return self.session.busy

    @property
    def is_running(self) -> bool:
        """The runner's thread is alive (it ends at shutdown)."""
        return bool(getattr(self.session.runner, "is_alive", False))
