"""A model the caller already holds (a notebook's, a training script's), as a :class:`LoadedModel`.

Every other model Hookscope opens comes from a spec (:mod:`.sources`). A
researcher's model usually lives in a Python session instead, built by their
code with weights in memory; :func:`live_model` wraps it without a file:

- the module is used in place: not copied, not moved (its device is kept: the
  session runs on the device its parameters are on), not put in eval mode
  here. Runs are made in eval mode unless the train option is on, and the
  runner puts the module's own mode back after each run (:data:`LIVE`);
- Hookscope's hooks are removed after every run, as for any model; hooks the
  caller registered stay and keep firing;
- ``tokenizer`` (a Hugging Face tokenizer, or a :class:`~.meaning.TextCodec`)
  makes the output read as next-token scores and turns ``text:`` inputs (or
  an ``example_input`` given as a string) into token ids;
- ``labels`` (a list of class names, or a labels file) names the classes.

Its spec, ``live:ClassName``, names no file: a session saved from it says so
(:mod:`.live_save`).
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any, Sequence

import torch
from torch import nn

from ..base.errors import InputError, SpecError
from ..base.meaning import CLASSES, TOKENS, OutputMeaning
from ..base.text_codec import HFCodec
from .class_labels import read_labels
from .source_hf import _head_kind
from .loaded_model import LoadedModel

#: ``LoadedModel.kind`` of a model handed over in this process.
LIVE = "live"
#: The prompt a tokenizer's model runs on when no example input is given.
DEFAULT_PROMPT = "The quick brown fox jumps over the lazy dog"


def is_live(lm: Any) -> bool:
    """Whether ``lm`` (a LoadedModel) wraps a module its caller holds (see the module docstring)."""
    return getattr(lm, "kind", None) == LIVE


def _codec(tokenizer: Any) -> Any:
    """``tokenizer`` as a :class:`~.meaning.TextCodec`."""
    if all(hasattr(tokenizer, n) for n in ("encode", "decode", "token_strings", "name")):
        return tokenizer  # already one
    if callable(tokenizer) and hasattr(tokenizer, "convert_ids_to_tokens"):
        return HFCodec(tokenizer)
    raise InputError(f"tokenizer={type(tokenizer).__name__} is not a tokenizer Hookscope knows: "
                     "pass a Hugging Face tokenizer (AutoTokenizer.from_pretrained(...)) or an "
                     "object with encode, decode, token_strings and name")


def _is_hf(module: nn.Module) -> bool:
    return hasattr(module, "config") and hasattr(module, "main_input_name")


def _prompt_input(module: nn.Module, prompt: str, codec: Any) -> tuple[Any, tuple[str, ...]]:
    """The model's input for ``prompt``: the tokenizer's keywords for a Hugging Face model,
    else a ``1 x tokens`` tensor of ids."""
    if _is_hf(module) and hasattr(codec, "encode_batch"):
        enc = {k: v for k, v in codec.encode_batch(prompt).items() if isinstance(v, torch.Tensor)}
        return enc, tuple(enc)
    ids = codec.encode(prompt)
    if not ids:
        raise InputError(f"the tokenizer made no tokens of {prompt!r}: give another prompt")
    return torch.tensor([ids], dtype=torch.long), ()


def _labels(labels: Sequence[str] | str | Path) -> list[str]:
    if isinstance(labels, (str, Path)):
        return read_labels(labels)
    names = [str(x) for x in labels]
    if not names:
        raise InputError("labels=[] names no class: pass one name per output class, or leave it out")
    return names


def live_meaning(module: nn.Module, codec: Any, labels: list[str] | None) -> OutputMeaning:
    """What the module's output means, from what the caller passed and, for a Hugging
    Face model, its head and config (as ``hf:`` would read it)."""
    meaning = OutputMeaning()
    if _is_hf(module):
        kind = _head_kind(type(module).__name__)
        cfg_labels = getattr(module.config, "id2label", None)
        if labels is None and kind == CLASSES and cfg_labels:
            labels = [str(cfg_labels[i]) for i in sorted(cfg_labels)]
        meaning = OutputMeaning(kind=kind, field="logits",
                                causal=not type(module).__name__.endswith(("ForMaskedLM", "ForCTC")))
    if codec is not None:
        meaning.codec = codec
        if labels is None:
            meaning.kind = TOKENS
    if labels is not None:
        if meaning.kind == TOKENS:
            raise InputError("labels name classes, but with a tokenizer the output is read as "
                             "next-token scores: pass one of tokenizer= or labels=")
        meaning.kind, meaning.labels = CLASSES, labels
    return meaning


def module_device(module: nn.Module) -> str:
    """The device the module's first parameter (or buffer) is on, as a device name; ``cpu``
    for a module without any."""
    first = next(itertools.chain(module.parameters(), module.buffers()), None)
    return str(first.device) if first is not None else "cpu"


def live_model(module: nn.Module, example_input: Any = None, *, tokenizer: Any = None,
               labels: Sequence[str] | str | Path | None = None, name: str | None = None) -> Any:
    """A :class:`~.sources.LoadedModel` over ``module`` itself (see the module docstring).

    ``example_input``: what a run feeds by default (a tensor, a tuple of
    positional inputs, a dict of keywords), or a prompt string when a
    tokenizer is given. Raises :class:`SpecError` for something that is not a
    module, :class:`InputError` for a tokenizer or labels Hookscope cannot use.
    """
    if not isinstance(module, nn.Module):
        raise SpecError(f"explore() needs a torch nn.Module; got {type(module).__name__}. Pass "
                        "the model object itself (not its class or its state_dict)")
    codec = _codec(tokenizer) if tokenizer is not None else None
    meaning = live_meaning(module, codec, _labels(labels) if labels is not None else None)
    if isinstance(example_input, str) or (example_input is None and codec is not None):
        if codec is None:
            raise InputError("a string as the example input is a prompt, and a prompt needs a "
                             "tokenizer: pass tokenizer=..., or give the input as a tensor")
        example_input, meaning.input_keys = _prompt_input(module, example_input or DEFAULT_PROMPT,
                                                          codec)
    elif isinstance(example_input, dict):
        meaning.input_keys = tuple(example_input)
    label = name or type(module).__name__
    notes = ["a model of this Python session, used in place (not a copy)"]
    return LoadedModel(module, example_input, f"{LIVE}:{label}", LIVE,
                       f"{label} from this Python session", meaning=meaning, notes=notes)
