"""What a :class:`~hookscope.core.session.session.Session` announces and keeps beside its
plan: the run options, the change events its subscribers receive, the setup
waiting for a load to arrive, and how typed input text is tidied.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..plan.plan import Plan


@dataclass(frozen=True)
class Options:
    """How runs are made: statistics-only captures, train mode, Live (run on every change)."""

    stats_only: bool = False
    train: bool = False
    live: bool = False


def tidy_input_text(text: str | None) -> str:
    """The input text as typed, less surrounding blanks, except a prompt's trailing
    spaces (``text:the dog sat on the ``): those are tokens."""
    text = (text or "").lstrip()
    return text if text.startswith("text:") else (text.rstrip() or "example")


@dataclass(frozen=True)
class SessionEvent:
    """One change. ``kind`` and ``value``:

    ``model`` (LoadedModel; ``session.tree`` is its tree), ``load_failed`` (message),
    ``load_warning`` (message: what the load could not apply, e.g. a layer the
    model lacks; the rest of the setup applies),
    ``plan`` (Plan), ``input`` (str), ``device`` (str), ``options`` (Options),
    ``observed`` (TreeNode with output shapes), ``started`` (None),
    ``progress`` (:class:`~hookscope.core.session.runner.Progress`), ``result`` (RunResult),
    ``error`` (message), ``cancelled`` (None), ``idle`` (None: nothing in flight
    or waiting any more). ``request_id`` is the runner's id where one applies.
    """

    kind: str
    value: Any = None
    request_id: int | None = None


@dataclass
class LoadSetup:
    """What to apply once a load arrives."""

    plan: Plan | None = None
    input_text: str | None = None
    device: str | None = None
    options: Options | None = None
    view: dict | None = None
    run_after: bool = True
    trust_pickle: bool = False
    labels: str | None = None
    trust: Any = None  # the load's code_trust.CodeTrust (None: the spec was typed)
