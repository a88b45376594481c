"""Editing a plan: one intervention per layer, and the undo history of edits.

:func:`plan_with` is the one way a session puts an intervention on a layer
(replacing what was there) or takes it off. :class:`PlanHistory` keeps the
plans a session had, so that undo and redo fall out of its plan edits; the
steps of one drag (edits with the same ``merge`` key in a row) are one step.
"""

from __future__ import annotations

import dataclasses

from .interventions import Clamp, Intervention
from .plan import Plan

#: How many plan edits can be taken back.
UNDO_DEPTH = 200


def plan_with(plan: Plan, path: str, intervention: Intervention | None) -> Plan:
    """``plan`` with ``path``'s intervention replaced by ``intervention`` (``None``: removed)."""
    if hasattr(Plan, "with_intervention"):  # the interventions family (issue 7, section 2)
        return (plan.without_intervention(path) if intervention is None  # type: ignore[attr-defined]
                else plan.with_intervention(path, intervention))  # type: ignore[attr-defined]
    # Before it: clamps live in Plan.clamp, every other kind in Plan.interventions.
    clamp = {p: b for p, b in plan.clamp.items() if p != path}
    others = {p: i for p, i in plan.interventions.items() if p != path}
    if isinstance(intervention, Clamp):
        clamp[path] = (float(intervention.lo), float(intervention.hi))
    elif intervention is not None:
        others[path] = intervention
    return dataclasses.replace(plan, clamp=clamp, interventions=others)


def intervention_for(plan: Plan, path: str) -> Intervention | None:
    return plan.all_interventions().get(path)


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
