"""A runner thread that answers before ``submit()`` has returned to the session.

The session records a request's id (the load or run it waits for) after the
runner hands it back; an answer applied before that was taken for a replaced
run's and the session stayed busy for good (a flaky reliability test found
it). These runners hold ``submit()`` open until the answer has been delivered,
or for half a second, whichever comes first, so the race is lost every time.
"""

from __future__ import annotations

import threading

from hookscope.core import Session
from hookscope.core.session.runner import FINAL, LocalRunner


class AnswersBeforeSubmitReturns(LocalRunner):
    def __init__(self, listener):
        self._answered: dict[int, threading.Event] = {}
        self._ids_lock = threading.Lock()

        def tell(ev):
            listener(ev)
            if isinstance(ev, FINAL):
                self._event(ev.request_id).set()
        super().__init__(tell, progress_every_s=0)

    def _event(self, rid: int) -> threading.Event:
        with self._ids_lock:
            return self._answered.setdefault(rid, threading.Event())

    def submit(self, request):
        future = super().submit(request)
        # the runner thread answers while the caller is still here
        self._event(future.request_id).wait(0.5)
        return future


def test_a_run_answered_before_submit_returns_leaves_the_session_idle_with_its_result():
    s = Session(runner_factory=AnswersBeforeSubmitReturns)
    try:
        s.open_model("demo:clamp", run_after=False).result(60)
        assert s.model is not None and not s.busy
        result = s.run(timeout_s=60)
        assert not s.busy
        assert s.last_result is result
        second = s.run(timeout_s=60)
        assert s.last_result is second and not s.busy
    finally:
        s.close()
