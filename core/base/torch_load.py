"""``torch.load(weights_only=True)`` for files Hookscope reads as tensors, without torch's note.

A file that is not torch's own format (a plain ``pickle.dumps``, e.g. a hostile
one) makes torch's safe unpickler warn "Detected pickle protocol 4 in the
checkpoint ..." before it refuses it: two lines on stderr above Hookscope's own
one-line refusal, and about torch's internals, not the file. :func:`load_tensors`
ignores exactly that warning, for the duration of its own load only (no
process-wide filter); every other warning still shows.
"""

from __future__ import annotations

import warnings
from typing import Any

import torch

#: How torch's weights_only unpickler starts its note about a foreign pickle protocol.
PROTOCOL_NOTE = r"Detected pickle protocol \d+ in the checkpoint"


def load_tensors(source: Any) -> Any:
    """``torch.load(source, map_location="cpu", weights_only=True)``, minus the protocol note."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=PROTOCOL_NOTE, category=UserWarning)
        return torch.load(source, map_location="cpu", weights_only=True)
