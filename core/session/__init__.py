"""The session: Session, its answers and types, session files, the runner and its messages,
the dispatching runner factory.

This file is the floor's face: widgets/ and app/ import these names from
here, never from a module inside (tests/test_floors.py checks it).
"""

from .dispatch_runner import dispatching_runner
from .live_save import LiveModelNotSaved
from .runner import LocalRunner, QueueRunner
from .runner_messages import RequestFuture, ViewFailed
from .session_events import (DerivedChanged, DeviceChanged, Idle, InputChanged, LoadFailed,
                             LoadWarning, ModelChanged, OptionsChanged, PlanChanged, ResultArrived,
                             RunCancelled, RunFailed, RunProgress, RunStarted, SaesChanged,
                             SessionEvent, TreeObserved)
from .scan_sidecar import SIDECAR_SUFFIX, SavedScan
from .session_file import SUFFIX, SessionSetup, read_session_file

__all__ = ["LiveModelNotSaved", "LocalRunner", "QueueRunner", "RequestFuture", "SUFFIX", "SessionSetup",
           "SIDECAR_SUFFIX", "SavedScan",
           "ViewFailed", "dispatching_runner", "read_session_file",
           "SessionEvent", "ModelChanged", "LoadFailed", "LoadWarning", "PlanChanged",
           "InputChanged", "DeviceChanged", "OptionsChanged", "DerivedChanged", "SaesChanged",
           "TreeObserved", "RunStarted", "RunProgress", "ResultArrived", "RunFailed",
           "RunCancelled", "Idle"]
