"""What a :class:`~hookscope.core.session.session.Session` tells its subscribers: one small
frozen dataclass per kind of change.

A subscriber dispatches on the event's type (``isinstance``, or a dict from type
to handler), never on a string. ``request_id`` is the runner's id where one
applies. For printing and for notebooks written against the older string events,
every event also has ``kind`` (its name: ``"plan"``, ``"result"``, ...) and
``value`` (its one field, or the event itself where it has several or none).
"""

from __future__ import annotations

import dataclasses
import threading
from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar

from ..model.code_trust import CodeToRun
from ..model.loaded_model import LoadedModel
from ..model.tree import TreeNode
from ..plan.plan import Plan
from .runner_messages import Progress
from .session_types import Options


@dataclass(frozen=True)
class SessionEvent:
    """One change; a subclass per kind."""

    request_id: int | None = field(default=None, kw_only=True)
    kind: ClassVar[str] = ""

    @property
    def value(self) -> Any:
        """The event's one field (the event itself when it has none or several)."""
        own = [f.name for f in dataclasses.fields(self) if f.name != "request_id"]
        return getattr(self, own[0]) if len(own) == 1 else None if not own else self


@dataclass(frozen=True)
class ModelChanged(SessionEvent):
    """A load arrived: the session's model is ``model`` (``session.tree`` is its tree)."""

    model: LoadedModel
    kind: ClassVar[str] = "model"


@dataclass(frozen=True)
class LoadFailed(SessionEvent):
    """A load failed; the current model, plan and results stay as they were.

    ``code``: what the load would have run, when it was refused for want of the person's
    yes (a :class:`~hookscope.core.model.code_trust.CodeTrustError` naming it; checked in
    the runner's thread), so a window can ask about exactly that code; else ``None``."""

    message: str
    code: CodeToRun | None = None
    kind: ClassVar[str] = "load_failed"

    @property
    def value(self) -> Any:
        return self.message  # the one thing to print; ``code`` is for a window's question


@dataclass(frozen=True)
class LoadWarning(SessionEvent):
    """What a load could not apply (a layer the model lacks); the rest of its setup applies."""

    message: str
    kind: ClassVar[str] = "load_warning"


@dataclass(frozen=True)
class PlanChanged(SessionEvent):
    plan: Plan
    kind: ClassVar[str] = "plan"


@dataclass(frozen=True)
class InputChanged(SessionEvent):
    text: str
    kind: ClassVar[str] = "input"


@dataclass(frozen=True)
class DeviceChanged(SessionEvent):
    device: str
    kind: ClassVar[str] = "device"


@dataclass(frozen=True)
class OptionsChanged(SessionEvent):
    options: Options
    kind: ClassVar[str] = "options"


@dataclass(frozen=True)
class DerivedChanged(SessionEvent):
    """The views every run also computes (:meth:`Session.set_derived`), by name."""

    derived: dict[str, Any]
    kind: ClassVar[str] = "derived"


@dataclass(frozen=True)
class SaesChanged(SessionEvent):
    """The SAE folders attached to layers, by layer path."""

    saes: dict[str, str]
    kind: ClassVar[str] = "sae"


@dataclass(frozen=True)
class TreeObserved(SessionEvent):
    """The session's tree now has output shapes and call counts."""

    tree: TreeNode | None
    kind: ClassVar[str] = "observed"


@dataclass(frozen=True)
class RunStarted(SessionEvent):
    """A load or the newest run started."""

    kind: ClassVar[str] = "started"


@dataclass(frozen=True)
class RunProgress(SessionEvent):
    progress: Progress
    kind: ClassVar[str] = "progress"


@dataclass(frozen=True)
class ResultArrived(SessionEvent):
    """A run's result (a :class:`~hookscope.core.RunResult`), now ``session.last_result``."""

    result: Any
    kind: ClassVar[str] = "result"


@dataclass(frozen=True)
class RunFailed(SessionEvent):
    message: str
    kind: ClassVar[str] = "error"


@dataclass(frozen=True)
class RunCancelled(SessionEvent):
    kind: ClassVar[str] = "cancelled"


@dataclass(frozen=True)
class Idle(SessionEvent):
    """Nothing in flight or waiting any more."""

    kind: ClassVar[str] = "idle"


class Subscribers:
    """Who hears a session's events. With a ``home`` thread (a session with a ``post``),
    an event raised on another thread is handed to ``post``, so subscribers always hear
    it on their own thread."""

    def __init__(self, post: Callable[[Callable[[], None]], None], home: int | None) -> None:
        self._post = post
        self._home = home
        self._callbacks: list[Callable[[SessionEvent], None]] = []

    def add(self, callback: Callable[[SessionEvent], None]) -> Callable[[], None]:
        """Tell ``callback`` every event from now on; returns a function that stops it."""
        self._callbacks.append(callback)
        return lambda: self._callbacks.remove(callback) if callback in self._callbacks else None

    def tell(self, ev: SessionEvent) -> None:
        if self._home is not None and threading.get_ident() != self._home:
            self._post(lambda: self._tell_here(ev))  # an edit from another thread (a notebook's)
        else:
            self._tell_here(ev)

    def _tell_here(self, ev: SessionEvent) -> None:
        for cb in list(self._callbacks):
            cb(ev)

    def clear(self) -> None:
        self._callbacks.clear()


__all__ = ["SessionEvent", "Subscribers", "ModelChanged", "LoadFailed", "LoadWarning", "PlanChanged",
           "InputChanged", "DeviceChanged", "OptionsChanged", "DerivedChanged", "SaesChanged",
           "TreeObserved", "RunStarted", "RunProgress", "ResultArrived", "RunFailed",
           "RunCancelled", "Idle"]
