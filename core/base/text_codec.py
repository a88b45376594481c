"""Tokenizers behind one small interface (:class:`~.meaning.TextCodec`).

:class:`CharCodec` is the character-level tokenizer of ``demo:lm`` (no extra
package). :class:`HFCodec` wraps a Hugging Face tokenizer. Both turn a
prompt into ids for the ``text:`` input and ids into readable strings for
token axes and next-token tables. :class:`TokenTable` is what a client of a
remote model (Ray) holds instead of the tokenizer: every token's readable
string, so token axes and next-token tables read the same; prompts are
tokenized where the tokenizer is, in the actor.
"""

from __future__ import annotations

from typing import Any, Sequence
from .errors import InputError


def readable(piece: str) -> str:
    """A token string that shows its whitespace (a leading space reads as a dot)."""
    return (piece.replace("Ġ", "·").replace("▁", "·").replace(" ", "·")
            .replace("\n", "⏎").replace("\t", "⇥").replace("Ċ", "⏎"))


class CharCodec:
    """One token per character of ``alphabet``; unknown characters map to ``unknown``.

    ``lower``: text is lower-cased first (an alphabet without capitals).
    """

    def __init__(self, alphabet: str, unknown: str = "?", lower: bool = False) -> None:
        if unknown not in alphabet:
            raise ValueError("the unknown character must be in the alphabet")
        self.alphabet = alphabet
        self.name = f"characters ({len(alphabet)})"
        self._index = {c: i for i, c in enumerate(alphabet)}
        self._unknown = self._index[unknown]
        self.lower = lower

    @property
    def vocab_size(self) -> int:
        return len(self.alphabet)

    def encode(self, text: str) -> list[int]:
        return [self._index.get(c, self._unknown) for c in (text.lower() if self.lower else text)]

    def decode(self, ids: Sequence[int]) -> str:
        return "".join(self.alphabet[int(i)] if 0 <= int(i) < len(self.alphabet) else "?"
                       for i in ids)

    def token_strings(self, ids: Sequence[int]) -> list[str]:
        return [readable(self.decode([i])) for i in ids]


class HFCodec:
    """A Hugging Face tokenizer (``PreTrainedTokenizerBase``) as a :class:`TextCodec`."""

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer
        self.name = type(tokenizer).__name__

    @property
    def vocab_size(self) -> int:
        return len(self.tokenizer)

    def encode(self, text: str) -> list[int]:
        return list(self.tokenizer(text)["input_ids"])

    def encode_batch(self, text: str) -> dict[str, Any]:
        """Every keyword the tokenizer makes for ``text`` (input_ids, attention_mask, ...)."""
        return dict(self.tokenizer(text, return_tensors="pt"))

    def decode(self, ids: Sequence[int]) -> str:
        return self.tokenizer.decode([int(i) for i in ids])

    def token_strings(self, ids: Sequence[int]) -> list[str]:
        pieces = self.tokenizer.convert_ids_to_tokens([int(i) for i in ids])
        return [readable(str(p)) if p is not None else str(i) for p, i in zip(pieces, ids)]


#: The most token strings a :class:`TokenTable` carries (ids beyond read as numbers).
TABLE_LIMIT = 1 << 18


class TokenTable:
    """A tokenizer's readable token strings without the tokenizer (see the module docstring).

    ``remote``: where the prompts are tokenized, for the message of :meth:`encode`.
    """

    def __init__(self, name: str, strings: Sequence[str], remote: str = "the Ray actor") -> None:
        self.name = name
        self.strings = list(strings)
        self.remote = remote

    @classmethod
    def of(cls, codec: Any, limit: int = TABLE_LIMIT) -> "TokenTable":
        """The table of ``codec``'s first ``limit`` ids (its whole vocabulary, as a rule)."""
        n = min(int(codec.vocab_size), limit) if hasattr(codec, "vocab_size") else 0
        return cls(codec.name, codec.token_strings(list(range(n))) if n else [])

    @property
    def vocab_size(self) -> int:
        return len(self.strings)

    def encode(self, text: str) -> list[int]:
        raise InputError(f"text: prompts of this model are tokenized by {self.remote}, which "
                         "holds its tokenizer: run the model to see the prompt's tokens")

    def token_strings(self, ids: Sequence[int]) -> list[str]:
        n = len(self.strings)
        return [self.strings[int(i)] if 0 <= int(i) < n else str(int(i)) for i in ids]

    def decode(self, ids: Sequence[int]) -> str:
        """The readable strings joined (whitespace shows as in :func:`readable`)."""
        return "".join(self.token_strings(ids))
