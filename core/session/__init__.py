"""The session: Session, its answers and types, session files, the runner and its messages,
the dispatching runner factory.

This file is the floor's face: widgets/ and app/ import these names from
here, never from a module inside (tests/test_floors.py checks it).
"""

from .dispatch_runner import dispatching_runner
from .live_save import LiveModelNotSaved
from .runner import LocalRunner, QueueRunner
from .runner_messages import ViewFailed
from .session_file import SUFFIX, SessionSetup, read_session_file

__all__ = ["LiveModelNotSaved", "LocalRunner", "QueueRunner", "SUFFIX", "SessionSetup",
           "ViewFailed", "dispatching_runner", "read_session_file"]
