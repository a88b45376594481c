"""The undo history of plan edits.

:class:`PlanHistory` keeps the plans a session had, so that undo and redo
fall out of its plan edits; the steps of one drag (edits with the same
``merge`` key in a row) are one step. The edits themselves are
:class:`~hookscope.core.plan.plan.Plan`'s (``with_intervention``,
``without_intervention``: one intervention per layer).
"""

from __future__ import annotations

from typing import Iterable, Sequence

from .plan import Plan

#: How many plan edits can be taken back.
UNDO_DEPTH = 200


class PlanHistory:
    """Earlier and undone plans."""

    def __init__(self) -> None:
        self._undo: list[Plan] = []
        self._redo: list[Plan] = []
        self._merge: str | None = None

    def record(self, current: Plan, merge: str | None = None) -> None:
        """``current`` is about to be replaced by an edit."""
        if merge is None or merge != self._merge:
            self._undo.append(current)
            del self._undo[:-UNDO_DEPTH]
        self._merge = merge
        self._redo.clear()

    def seal(self) -> None:
        """The next edit starts a new step."""
        self._merge = None

    def undo(self, current: Plan) -> Plan | None:
        """The plan before ``current``, or ``None``."""
        self._merge = None
        if not self._undo:
            return None
        self._redo.append(current)
        return self._undo.pop()

    def redo(self, current: Plan) -> Plan | None:
        self._merge = None
        if not self._redo:
            return None
        self._undo.append(current)
        return self._redo.pop()

    def clear(self) -> None:
        self._undo.clear()
        self._redo.clear()
        self._merge = None

    @property
    def can_undo(self) -> bool:
        return bool(self._undo)

    @property
    def can_redo(self) -> bool:
        return bool(self._redo)


def in_model_order(paths: set[str], order: Iterable[str], captured: Sequence[str]) -> tuple[str, ...]:
    """``paths`` in the model's ``order``; paths it lacks after them, those already
    ``captured`` in their order first, then the rest sorted."""
    known = [p for p in order if p in paths]
    return tuple(known + [p for p in captured if p in paths and p not in known]
                 + sorted(p for p in paths if p not in known and p not in captured))
