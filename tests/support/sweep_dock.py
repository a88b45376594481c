"""Filling the Sweep dock's fields as a person does: each field typed over with the keyboard,
the metric's kind picked from its list and its tokens typed."""

from __future__ import annotations

from .keys import choose, retype
from .window_menus import click_view_action


def fill_sweep(view, axes: str, template: str, *, source: str | None = None,
               vectors: str | None = None, inputs: str | None = None,
               metric: tuple[str, ...] | None = None) -> None:
    """Type ``axes`` and ``template`` (and ``source``, ``vectors``, ``inputs`` where given)
    into the dock ``view``; ``metric``: the kind, then its tokens (``("logit-diff", "#3",
    "#5")``)."""
    retype(view.axes, axes)
    retype(view.template, template)
    if source is not None:
        retype(view.source, source)
    if vectors is not None:
        retype(view.vectors, vectors)
    if metric is not None:
        choose(view.metric_box.kind, metric[0])
        for box, token in zip(view.metric_box.tokens, metric[1:]):
            retype(box.lineEdit(), token)
    if inputs is not None:
        retype(view.inputs, inputs)


def first_run_shown(win, qtbot) -> None:
    """Wait until the window shows its model's first run and is idle."""
    qtbot.waitUntil(lambda: win.last_result is not None and win.is_idle(), timeout=60_000)


def open_sweep_dock(win, qtbot):
    """Once the first run is shown, View → Sweep clicked; the dock's view when it is up."""
    first_run_shown(win, qtbot)
    click_view_action(qtbot, win, "actionViewSweep")
    qtbot.waitUntil(win.sweep_dock.isVisible)
    return win.sweep_view
