"""What a :class:`~hookscope.core.session.session.Session` keeps beside its plan: the run
options, the setup waiting for a load to arrive, and how typed input text is tidied
(the events it announces are in :mod:`.session_events`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..base.errors import HookscopeError
from ..model.loaded_model import LoadedModel
from ..model.tree import TreeNode
from ..plan.path_patterns import expand_plan, without_unknown_layers
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
    saes: dict = field(default_factory=dict)  # a session file's SAEs (session_lm.SaeEntry)
    views: tuple = ()  # a session file's LM views

    def plan_on(self, model: LoadedModel, tree: TreeNode | None) -> tuple[Plan, str | None]:
        """The plan to use on the loaded ``model``: this setup's, its wildcards (a command
        line's ``--capture 'h.*.mlp'``) made this model's paths, less the layers it lacks;
        and what was left out, in words (``None``: nothing)."""
        if self.plan is None:
            return Plan(), None
        known = [n.path for n in tree.walk()] if tree is not None else []
        try:
            return without_unknown_layers(expand_plan(self.plan, model.module, known),
                                          model.module, known)
        except HookscopeError as exc:
            return Plan(), str(exc)

    def input_on(self, model: LoadedModel) -> str:
        """The input text to use on the loaded ``model``: this setup's, else the model's
        example (``"example"``) where it has one, else none."""
        if self.input_text is not None:
            return tidy_input_text(self.input_text)
        return "example" if model.example_input is not None else ""
