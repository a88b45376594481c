"""Kinds of module that hooks cannot see as they are, made hookable or refused clearly.

Run on every loaded model before its tree is built (:func:`prepare_loaded`):

- TorchScript (``torch.jit.script``/``trace``/``load``): hooks cannot be
  attached to a compiled graph, so it is refused with what to use instead.
- ``torch.compile``: the compiled wrapper runs a graph that was traced
  without hooks (after a first run, hooks added later silently never fire),
  so Hookscope hooks the original module, which runs eagerly, and says so.
- Lazy modules (``nn.LazyLinear`` ...): their parameters have no shape until
  a first forward, so one forward on the example input materialises them.
"""

from __future__ import annotations

import zipfile
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.nn.modules.lazy import LazyModuleMixin

from ..base.errors import SpecError
from ..base.nested import map_tensors
from ..base.call_args import call_model

COMPILED_NOTE = ("torch.compile'd model: Hookscope hooks the original module (_orig_mod), "
                 "which runs eagerly, so every hook fires")


def is_torchscript(module: Any) -> bool:
    return isinstance(module, (torch.jit.ScriptModule, torch.jit.ScriptFunction))


def uncompiled(module: nn.Module) -> tuple[nn.Module, bool]:
    """``module`` without ``torch.compile``'s wrapper, and whether there was one."""
    orig = getattr(module, "_orig_mod", None)
    if isinstance(orig, nn.Module) and type(module).__name__ == "OptimizedModule":
        return orig, True
    return module, False


def has_lazy(module: nn.Module) -> bool:
    return any(isinstance(m, LazyModuleMixin) and m.has_uninitialized_params()
               for m in module.modules())


def materialise(module: nn.Module, example: Any, spec: str) -> None:
    """Run one forward so every lazy module gets its real parameters."""

    if example is None:
        raise SpecError(f"{spec} has lazy modules (e.g. nn.LazyLinear) whose sizes are known "
                        "only after a first forward, and no example input to run it: let the "
                        "factory return (module, example_input)")
    try:
        with torch.no_grad():
            call_model(module, map_tensors(lambda t: t.clone(), example))
    except Exception as exc:
        raise SpecError(f"{spec} has lazy modules; materialising them with the example input "
                        f"failed: {type(exc).__name__}: {exc}") from exc


def prepare_loaded(lm: Any) -> None:
    """Make ``lm.module`` (a :class:`~.sources.LoadedModel`) hookable, in place, or refuse it."""
    if is_torchscript(lm.module):
        raise SpecError(f"{lm.spec} is a TorchScript module: hooks cannot be attached to a "
                        "scripted or traced graph. Give Hookscope the eager module (a factory "
                        "returning the nn.Module before torch.jit.script/trace) or a "
                        "torch.export .pt2 file")
    module, compiled = uncompiled(lm.module)
    if compiled:
        lm.module = module
        lm.description = (lm.description + "; " if lm.description else "") + COMPILED_NOTE
        lm.notes.append(COMPILED_NOTE)
        if is_torchscript(module):
            prepare_loaded(lm)
    if has_lazy(lm.module):
        materialise(lm.module, lm.example_input, lm.spec)
    lm.meaning.notes = list(dict.fromkeys(lm.meaning.notes + lm.notes))


def refuse_torchscript_file(spec: str) -> None:
    """Refuse a ``.pt`` file that is a TorchScript archive (``torch.jit.save``), before any
    unpickling: it holds a compiled graph, which hooks cannot see."""
    path = Path(spec).expanduser()
    if not path.is_file() or not zipfile.is_zipfile(path):
        return
    try:
        with zipfile.ZipFile(path) as zf:
            names = zf.namelist()
    except (OSError, zipfile.BadZipFile):
        return  # the loader says what is wrong with it
    if any(n.split("/", 1)[-1].startswith(("code/", "constants.pkl")) for n in names):
        raise SpecError(f"{path.name} is a TorchScript archive (torch.jit.save): hooks cannot be "
                        "attached to a scripted or traced graph. Give Hookscope the eager module "
                        "(a factory returning the nn.Module, with --weights) or a torch.export "
                        ".pt2 file")
