"""The Sweep dock's Inputs field read: the set it names opened on the GUI thread (a refusal
shown at once, as File → Open inputs… shows it), its inputs read as the model takes them
only when the sweep asks for them, on the runner's thread; and its size for the cost line.
The inputs and names are those :meth:`Session.sweep` reads with ``inputs=``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Callable

from hookscope.core import HookscopeError, Session
from hookscope.core.dataset import InputSet, open_inputs


class SetItems(Sequence):
    """An input set's inputs as the model takes them (or their names), each read when asked
    for: the sweep reads them on the runner's thread, not the GUI's."""

    def __init__(self, inputs: InputSet, read: Callable[[int], Any]) -> None:
        self.inputs = inputs
        self.read = read

    def __len__(self) -> int:
        return len(self.inputs)

    def __getitem__(self, i):  # type: ignore[override]
        if isinstance(i, slice):
            return [self[k] for k in range(*i.indices(len(self)))]
        if not -len(self) <= i < len(self):
            raise IndexError(i)
        return self.read(i % len(self))


def input_set(text: str, session: Session) -> tuple[SetItems, SetItems] | None:
    """The set the Inputs field names as the sweep reads it, ``(inputs, names)``, for the
    session's model; ``None`` for an empty field (the window's input)."""
    if not text.strip():
        return None
    lm = session.model
    if lm is None:
        raise HookscopeError("open a model first, then sweep it over an input set")
    iset = open_inputs(text)   # typed as it is: a name may end in a space
    if len(iset) == 0:
        raise HookscopeError(f"inputs {text}: the set holds no input; give at least one")
    session.read_files.add("the input file", iset.source)  # no export may replace it
    example, codec = lm.example_input, lm.meaning.codec
    return (SetItems(iset, lambda i: iset.item(i, example, codec)),
            SetItems(iset, iset.describe))


class SetSize:
    """How many inputs the set a text names holds (``None``: empty text, the window's
    input; a str: why it cannot be opened), remembered while the text stays the same (the
    cost line asks at every edit of any field)."""

    def __init__(self) -> None:
        self._last: tuple[str, int | str] | None = None

    def __call__(self, text: str) -> int | str | None:
        if not text.strip():
            return None
        if self._last is None or self._last[0] != text:
            try:
                size: int | str = len(open_inputs(text))
            except HookscopeError as exc:
                size = str(exc)
            self._last = (text, size)
        return self._last[1]
