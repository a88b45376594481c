"""Saving a session whose model lives in a Python session (:mod:`.live_model`).

A session file names its model by a spec and never holds the model itself.
For a model built in a notebook there is no spec to name, so saving says so
(:class:`LiveModelNotSaved`, a warning, and a ``note`` in the file) and
offers what makes the file reopen the model:

- ``weights=True`` writes the module's ``state_dict`` beside the session file
  (``NAME.weights.pt``, read back with ``weights_only=True``), and its example
  input, when the session runs on it (``NAME.input.pt``);
- where the module's class can be imported by name and built with no
  arguments, the file names it as a factory, ``package.module:Class``, so
  ``hookscope FILE.hookscope.json`` reopens the model with those weights;
  otherwise the note says why it cannot (a class defined in the notebook, or
  one whose constructor needs arguments) and how to reopen it by hand.
"""

from __future__ import annotations

import importlib
import inspect
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..base.atomic_write import all_or_none
from ..base.errors import HookscopeError


class LiveModelNotSaved(UserWarning):
    """The session file saved from a live model does not hold the model."""


@dataclass
class LiveSave:
    """What a live session's save wrote: the ``factory`` reference (or ``None``), the
    ``weights`` file (or ``None``) and the ``note`` saying what the file lacks."""

    factory: str | None
    why_no_factory: str
    weights: Path | None
    note: str


def factory_reference(module: Any) -> tuple[str | None, str]:
    """``("package.module:Class", "")`` when ``type(module)`` is importable by that name
    and its constructor needs no argument; else ``(None, why not)``. Nothing is built."""
    cls = type(module)
    mod_name, qual = cls.__module__, cls.__qualname__
    if mod_name == "__main__" or "<locals>" in qual or "." in qual:
        where = "in the notebook or script itself" if mod_name == "__main__" else "inside a function"
        return None, (f"its class {qual} is defined {where}, so no file can name it: move it into "
                      "a module to make the session reopen it")
    try:
        found = importlib.import_module(mod_name)
    except Exception:  # noqa: BLE001 - a module that cannot be imported again names nothing
        return None, f"its module {mod_name} cannot be imported by name"
    if getattr(found, qual, None) is not cls:
        return None, f"{mod_name}.{qual} does not name its class"
    try:
        params = list(inspect.signature(cls).parameters.values())
    except (TypeError, ValueError):
        return None, f"the arguments of {qual}() cannot be read"
    needed = [p.name for p in params if p.default is p.empty
              and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    if needed:
        return None, (f"{qual}() needs arguments ({', '.join(needed)}): write a factory "
                      "function that builds it, and open file.py:factory --weights FILE")
    return f"{mod_name}:{qual}", ""


def beside(session_path: Path, what: str) -> Path:
    """``NAME.WHAT.pt`` beside ``NAME.hookscope.json``."""
    name = session_path.name
    stem = name[: -len(".hookscope.json")] if name.endswith(".hookscope.json") else session_path.stem
    return session_path.with_name(f"{stem}.{what}.pt")


def write_tensors(value: Any, path: Path) -> Path:
    """Tensors (a state_dict, an input) on the CPU, written whole or not at all."""
    import torch

    from ..base.atomic_write import atomic_write
    from ..base.nested import map_tensors

    cpu = map_tensors(lambda t: t.detach().cpu(), value)
    return atomic_write(path, lambda tmp: torch.save(cpu, tmp))


def write_weights(module: Any, path: Path) -> Path:
    """The module's state_dict (see :func:`write_tensors`)."""
    return write_tensors(dict(module.state_dict()), path)


def plan_live_save(module: Any, session_path: Path, weights: bool) -> LiveSave:
    """Write the weights (when asked) and say what the session file holds."""
    factory, why = factory_reference(module)
    written = write_weights(module, beside(session_path, "weights")) if weights else None
    if written and factory:
        note = (f"the model itself is not in this file: it reopens as {factory} with the "
                f"weights in {written.name}")
    elif written:
        note = (f"the model itself is not in this file, and {why}. Its weights are in "
                f"{written.name}: build the model, model.load_state_dict(torch.load(path, "
                "weights_only=True)), then Session.from_module(model, plan=...)")
    else:
        note = ("the model itself is not in this file (it was built in a Python session): save "
                "with weights=True to write its state_dict beside it"
                + (f"; it would reopen as {factory}" if factory else f"; {why}"))
    return LiveSave(factory, why, written, note)


def save_live(session: Any, path: Path, weights: bool, write: Any) -> Path:
    """Save ``session`` (its model live) to ``path`` with ``write(path, session, model_entry)``;
    warns :class:`LiveModelNotSaved` unless the file reopens the model by itself."""
    if session.model is None:
        raise HookscopeError("nothing to save: no model is open")
    if weights:  # the files written beside it never replace a file the session reads
        from ..base.own_inputs import files_read, refuse_overwrite
        from ..base.read_files import ReadFiles

        reads = ReadFiles()
        reads.update(session.read_files)
        refuse_overwrite([("the weights file", beside(path, "weights")),
                          ("the example input file", beside(path, "input"))],
                         files_read(None, None, [session.input_text], session.labels,
                                    plan=session.plan, into=reads), "the open model")
    # the weights, the example input and the session file land together or not at all
    with all_or_none():
        info = plan_live_save(session.model.module, path, weights)
        entry = {"spec": info.factory if (info.factory and info.weights) else session.model.spec,
                 "weights": str(info.weights) if info.factory and info.weights else None,
                 "note": info.note}
        if info.weights and not info.factory:
            entry["weights_file"] = str(info.weights)
        text = None
        example = session.model.example_input
        if weights and session.input_text == "example" and example is not None:
            text = str(write_tensors(example, beside(path, "input")))
        written = write(path, session, entry, text)
    session.save_note = info.note
    if not (info.factory and info.weights):
        warnings.warn(LiveModelNotSaved(info.note), stacklevel=3)
    return written
