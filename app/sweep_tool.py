"""View → Sweep: a dock that runs a sweep on the window's model and input through the
session's runner (off the GUI thread), with a progress bar and Cancel, and shows the grid.

The cells' progress comes from the runner's thread through a queued signal; the grid
arrives with the run's result (``result.extras["sweep"]``).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from PySide6.QtCore import QObject, Signal

from hookscope.core import MeanAblate, Patch, PlanError, RunResult
from hookscope.core.capture import SweepRequest, SweepResult
from hookscope.core.session import ViewFailed
from hookscope.widgets.sweep_view import SweepView

from .window_tools import hidden_bottom_dock

if TYPE_CHECKING:
    from .main_window import MainWindow


class _Relay(QObject):
    """Carries the runner thread's progress calls to the GUI thread."""

    progressed = Signal(int, int)


def pairs(text: str, what: str) -> dict[str, str]:
    """``'a=1; b=2'`` -> ``{'a': '1', 'b': '2'}`` (each split at its first '=')."""
    out: dict[str, str] = {}
    for piece in text.split(";"):
        if not piece.strip():
            continue
        key, sep, value = piece.partition("=")
        if not sep or not key.strip() or not value.strip():
            raise PlanError(f"{what} {piece.strip()!r}: write NAME=VALUE, several separated by ';'")
        out[key.strip()] = value.strip()
    if not out:
        raise PlanError(f"{what}: give at least one NAME=VALUE")
    return out


def install_sweep_tool(win: "MainWindow") -> None:
    """Add View → Sweep and its dock (hidden until asked for) to ``win``."""
    view = SweepView()
    win.sweep_view = view
    dock = hidden_bottom_dock(win, "Sweep", "sweepDock", view, "actionViewSweep")
    win.sweep_dock = dock
    relay = _Relay(win)
    relay.progressed.connect(view.set_progress)
    view.runRequested.connect(lambda a, t, s, m: start_sweep(win, relay, a, t, s, m))
    view.cancelRequested.connect(lambda: cancel_sweep(win))
    view.cellChosen.connect(lambda row, col: show_cell(win, row, col))
    win.resultShown.connect(lambda result: show_sweep(win, result))


def start_sweep(win: "MainWindow", relay: _Relay, axes: str, template: str, source: str,
                metric: str) -> None:
    if win.session.model is None:
        win.show_error("open a model first, then run a sweep on it")
        return
    try:
        over = pairs(axes, "axes")
        intervene = pairs(template, "template")
    except PlanError as exc:
        win.show_error(str(exc))
        return
    src = source.lstrip() if source.strip() else None  # a prompt keeps its trailing spaces

    def bind(ivs: dict) -> dict:
        out = {}
        for path, iv in ivs.items():
            if isinstance(iv, Patch) and iv.source_input is None:
                if src is None:
                    raise PlanError("patch needs a source input: fill in 'Source input' "
                                    "(e.g. text:the dog sat on the)")
                iv = Patch(src, at=iv.at)
            if isinstance(iv, MeanAblate) and iv.reference is None and src is not None:
                iv = MeanAblate(src, at=iv.at)
            out[path] = iv
        return out

    request = SweepRequest(over, intervene, metric.strip(), progress=relay.progressed.emit,
                           bind=bind)
    win.sweep_view.set_running(0)
    if win.session.submit_run(extra=(request,)) is None:
        win.sweep_view.show_note("a model is still loading: run the sweep once it is open")


def show_cell(win: "MainWindow", row: int, col: int) -> None:
    """The cell's plan becomes the window's (undoable), its layers captured, and runs: the
    panels show that cell's before and after."""
    result = win.sweep_view.model.result
    if result is None:
        return
    names = list(result.axes)
    at = [row, col][:len(names)] if len(names) <= 2 else [row]
    if len(names) > 2:
        win.show_error("a sweep of more than two axes shows its first axis only; run a cell "
                       "with SweepResult.run_cell in Python")
        return
    coords = {n: result.coords[n][i] for n, i in zip(names, at)}
    try:
        plan = result.plan_of(**coords)
    except PlanError as exc:
        win.show_error(str(exc))
        return
    current = win.session.current_plan()
    win.session.set_plan(dataclasses.replace(
        plan, capture=tuple(dict.fromkeys([*current.capture, *plan.capture])),
        keep_tensors=current.keep_tensors))
    win.request_run()


def cancel_sweep(win: "MainWindow") -> None:
    win.session.cancel()
    win.sweep_view.show_note("cancelled")


def show_sweep(win: "MainWindow", result: object) -> None:
    extras = result.extras if isinstance(result, RunResult) else {}
    got = extras.get("sweep")
    if isinstance(got, SweepResult):
        win.sweep_view.show_result(got)
    elif isinstance(got, ViewFailed):
        win.sweep_view.show_note(got.message)
        win.show_error(got.message)
