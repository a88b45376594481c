"""What loading a model gives back: :class:`LoadedModel`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from torch import nn

from ..base.meaning import OutputMeaning
from .learned import ModelMemory, memory_for


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
    #: What runs learned about this model (in-place victims, needs-grad...), passed to
    #: every run of it; by default the module's own (``memory_for``), so a script's
    #: ``compare(lm.module, ...)`` shares it.
    memory: ModelMemory = field(default=None, repr=False, compare=False)  # type: ignore[assignment]

    def __post_init__(self) -> None:
        self.memory = memory_for(self.module, self.memory)
