"""What a model's outputs mean, as told by the adapter that loaded it.

A plain module's output is a tensor of numbers; a classifier's is one score
per class with a label, a language model's is one score per vocabulary token
at each position, a detector's is a list of boxes with labels and scores.
:class:`OutputMeaning` carries what the views and :mod:`.outputs` need to
show them that way. Pure data, no Qt.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Protocol, Sequence

# Kinds of output an adapter can declare.
CLASSES = "classes"          # (batch, n_classes) logits; ``labels`` names them
TOKENS = "tokens"            # (batch, seq, vocab) logits over a tokenizer's vocabulary
DETECTIONS = "detections"    # list of dicts with boxes / labels / scores
GENERIC = "generic"          # numbers without a known meaning


class TextCodec(Protocol):
    """The little a view needs of a tokenizer."""

    name: str

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text`` (no batch dimension)."""

    def token_strings(self, ids: Sequence[int]) -> list[str]:
        """One readable string per id, for axes and tables."""

    def decode(self, ids: Sequence[int]) -> str:
        """The text of ``ids``."""


@dataclasses.dataclass
class OutputMeaning:
    """How to read a model's output.

    ``field`` names the output leaf that holds the scores (``"logits"`` for a
    Hugging Face ``ModelOutput``; ``None`` when the output is the tensor
    itself). ``labels`` are class names (``CLASSES``, ``DETECTIONS``).
    ``codec`` turns token ids to strings (``TOKENS``) and text to ids (the
    ``text:`` input). ``input_keys`` are the keyword inputs a tokenizer
    produces, in order, when the model takes keywords.
    ``notes`` are what a person should know (random weights, a compiled model
    hooked through its original module).
    """

    kind: str = GENERIC
    field: str | None = None
    labels: list[str] | None = None
    codec: TextCodec | None = None
    input_keys: tuple[str, ...] = ()
    causal: bool = True
    notes: list[str] = dataclasses.field(default_factory=list)

    def label(self, index: int) -> str:
        """The name of class ``index``, or the index itself when there are no labels."""
        if self.labels is not None and 0 <= index < len(self.labels):
            return str(self.labels[index])
        return str(index)


def score_leaf(output: Any, meaning: OutputMeaning | None) -> Any:
    """The part of ``output`` that holds the scores ``meaning`` speaks of."""
    if meaning is None or meaning.field is None:
        return output
    if isinstance(output, dict) and meaning.field in output:
        return output[meaning.field]
    value = getattr(output, meaning.field, None)
    return output if value is None else value
