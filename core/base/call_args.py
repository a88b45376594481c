"""Positional and keyword inputs of one call, kept together.

A model such as ``forward(self, input_ids, attention_mask=None)`` may be
given both kinds at once. The input spec ``([[1, 2, 3]], {"attention_mask":
[[1, 1, 1]]})`` (a tuple whose last item is a dict) becomes
``CallArgs(args=(ids,), kwargs={"attention_mask": mask})``, which
:func:`~.run.call_model` calls as ``module(*args, **kwargs)``. It is a
dataclass, so :func:`~.interventions.map_tensors` and ``tensor_leaves``
(``.args[0]``, ``.kwargs['attention_mask']``) handle it like any nested input.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any
from torch import nn


@dataclass(frozen=True)
class CallArgs:
    """``module(*args, **kwargs)``."""

    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)


def call_model(module: nn.Module, inputs: Any) -> Any:
    """Call ``module`` the way its input asks: a tuple spreads, a dict is keywords."""
    if isinstance(inputs, tuple) and not hasattr(inputs, "_fields"):
        return module(*inputs)
    if isinstance(inputs, dict):
        return module(**inputs)
    if isinstance(inputs, CallArgs):  # positional and keyword inputs together
        return module(*inputs.args, **inputs.kwargs)
    return module(inputs)
