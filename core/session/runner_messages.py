"""What goes into a runner and what comes back: the requests, the answers and
the interface every runner implements (:mod:`.runner` explains the protocol).

Plain frozen dataclasses without threads or behaviour: a remote runner (a
Ray actor) sends them across a process boundary as they are, and a front end
reads them without the machinery that produces them. :class:`RequestFuture`
is what ``submit`` hands back: the one answer a caller may wait for.
"""

from __future__ import annotations

from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol, Union

from ..base.read_files import ReadFiles
from ..engine.run import RunResult
from ..plan.plan import Plan
from ..model.code_trust import CodeTrust
from ..model.loaded_model import LoadedModel
from ..model.tree import TreeNode
from ..views.shape_views import ShapeViews


# -- requests ----------------------------------------------------------------
@dataclass(frozen=True)
class LoadRequest:
    """Load a model from a spec (a user factory may be slow: never on the GUI thread), or
    take ``model``, already built in this process (a notebook's module,
    :mod:`.live_model`): it is made hookable in the runner's thread and answered as a load,
    so the newest request still wins."""

    spec: str
    weights: str | None = None
    trust_pickle: bool = False
    #: which code the load may run (:mod:`.code_trust`); ``None``: the spec was typed
    trust: CodeTrust | None = None
    model: LoadedModel | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class RunRequest:
    """One comparison: baseline and intervened forward of ``input_text`` on ``model``.

    ``observe_tree``: also record every module's output shape and call count
    first (answered by :class:`Observed`). ``train``: run the module in train
    mode instead of eval mode. ``derived``: further views computed from the same
    model, input and plan after the comparison, each an object with a ``name``
    and ``compute(module, inputs, plan, device, meaning, should_stop)`` (the
    logit lens, a generation); their answers land in ``result.extras[name]``.
    ``shapes``: what a front end's panels show (views, sizes in pixels), so that a
    runner that makes display-ready numbers also makes their pictures; ``None``
    (a script, the CLI): none are made.
    """

    model: LoadedModel
    input_text: str
    plan: Plan
    device: str = "cpu"
    observe_tree: bool = False
    train: bool = False
    derived: tuple = ()
    shapes: ShapeViews | None = field(default=None, compare=False)


Request = Union[LoadRequest, RunRequest]


@dataclass(frozen=True)
class ViewFailed:
    """A derived view that could not be made (a lens on a model without an unembedding):
    kept in ``result.extras`` in its place, so the comparison itself is still shown."""

    message: str

    def to_json_dict(self) -> dict:
        return {"error": self.message}


# -- answers -----------------------------------------------------------------
@dataclass(frozen=True)
class Started:
    request_id: int


@dataclass(frozen=True)
class Progress:
    """``done`` of ``total`` layer calls of this request's forwards, ``elapsed_s`` since it started.

    ``total`` is an estimate until the model's first observe pass has
    counted its layer calls; ``done`` never exceeds it.
    """

    request_id: int
    done: int
    total: int
    elapsed_s: float


@dataclass(frozen=True)
class Loaded:
    """A load's answer: the model and its tree (output shapes not yet known)."""

    request_id: int
    model: LoadedModel
    tree: TreeNode


@dataclass(frozen=True)
class Observed:
    """A fresh tree with output shapes and call counts (the caller's tree is never touched)."""

    request_id: int
    tree: TreeNode


@dataclass(frozen=True)
class Finished:
    request_id: int
    result: RunResult


@dataclass(frozen=True)
class Failed:
    """``message`` for a person; ``error`` the exception itself where the runner
    is in-process (a remote runner sends ``None``)."""

    request_id: int
    message: str
    error: BaseException | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class Cancelled:
    request_id: int


RunnerEvent = Union[Started, Progress, Loaded, Observed, Finished, Failed, Cancelled]
Listener = Callable[[RunnerEvent], None]
FINAL = (Loaded, Finished, Failed, Cancelled)


class RequestFuture(Future[Union[Loaded, Finished]]):
    """One request's outcome, as :meth:`Runner.submit` returns it; ``request_id`` is the
    id its answers carry.

    It settles after the listener has heard the request's final answer: ``result()``
    is that answer (:class:`Loaded` or :class:`Finished`); a :class:`Failed` request
    raises its error (a :class:`~hookscope.core.errors.HookscopeError` as it was,
    anything else as :class:`~hookscope.core.errors.ForwardError`). A request that
    ends without an answer of its own is *cancelled* (``cancelled()``, ``result()``
    raises :class:`concurrent.futures.CancelledError`): replaced while it waited by a
    newer one (newest wins), stopped in flight (a newer request, ``cancel()``), or
    left when the runner closed. It stays pending while it runs, so ``cancel()`` on
    it works at any time: a waiting request is dropped, one in flight stops at its
    next layer.
    """

    def __init__(self, request_id: int) -> None:
        super().__init__()
        self.request_id = request_id


@dataclass
class Counts:
    """Requests answered so far, by outcome (``dropped``: replaced or cancelled runs)."""

    runs_done: int = 0
    runs_failed: int = 0
    dropped: int = 0
    loads_done: int = 0


class Runner(Protocol):
    """The interface every runner implements (see the module docstring)."""

    counts: Counts
    #: the files the owner's work reads: the runner's thread records what it opens there
    reads: ReadFiles | None

    def submit(self, request: Request) -> RequestFuture: ...
    def cancel(self) -> bool: ...
    def close(self, timeout_s: float = 1.0) -> bool: ...
    @property
    def in_flight(self) -> int | None: ...


__all__ = ["LoadRequest", "RunRequest", "Request", "Started", "Progress", "Loaded", "Observed",
           "Finished", "Failed", "Cancelled", "RunnerEvent", "Listener", "FINAL", "Counts", "Runner",
           "RequestFuture"]
