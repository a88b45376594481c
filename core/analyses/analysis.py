"""What an analysis is: a request with a name, parameters and ``compute(...)``, and a typed result.

An analysis is a frozen dataclass whose fields are its parameters and whose class
attribute ``name`` is the name it is registered under (:mod:`.analysis_registry`).
``compute`` runs it on one model, input, plan and device, after the session's
comparison, in the session's runner (off the GUI thread, locally or in a Ray actor):
``should_stop()`` is a stop point to call now and then (it counts progress and says
whether a newer request or a cancel wants the runner), and ``meaning`` says what the
model's output is (classes, tokens and their codec). The answer is a result with its
JSON form (``to_json_dict()``, as :class:`~hookscope.core.engine.run.RunResult`
writes it); results with a table give ``to_csv()`` too.

``Session.analyse(request)`` runs any of them and returns its result, typed: a
request of type ``Analysis[R]`` gives an ``R``.
"""

from __future__ import annotations

from typing import Any, Callable, Protocol, TypeVar, runtime_checkable

from torch import nn

from ..base.meaning import OutputMeaning
from ..plan.plan import Plan

R_co = TypeVar("R_co", covariant=True)


@runtime_checkable
class AnalysisResult(Protocol):
    """What an analysis answers: an object with its JSON form."""

    def to_json_dict(self) -> dict: ...


@runtime_checkable
class Analysis(Protocol[R_co]):
    """A request for an analysis, answered by an ``R_co``: a frozen dataclass (its fields are
    the parameters) with a ``name`` and :meth:`compute`."""

    @property
    def name(self) -> str: ...

    def compute(self, module: nn.Module, inputs: Any, plan: Plan, device: str,
                meaning: OutputMeaning, should_stop: Callable[[], bool] | None = None) -> R_co: ...


__all__ = ["Analysis", "AnalysisResult"]
