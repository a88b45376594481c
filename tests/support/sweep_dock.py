"""Filling the Sweep dock's fields as a person does: each field typed over with the keyboard,
the metric's kind picked from its list and its tokens typed."""

from __future__ import annotations

from .keys import choose, retype


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
