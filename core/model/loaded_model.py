"""What loading a model gives back: :class:`LoadedModel`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from torch import nn

from ..base.meaning import OutputMeaning


@dataclass
class LoadedModel:
    """A model ready to run: ``module`` in eval mode and what to feed it by default."""

    module: nn.Module
    example_input: Any
    spec: str
    kind: str
    description: str = ""
    weights: str | None = None
    # what the outputs mean (class labels, a tokenizer, boxes) and notes (random weights...)
    meaning: OutputMeaning = field(default_factory=OutputMeaning)
    notes: list[str] = field(default_factory=list)
