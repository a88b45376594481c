"""The model part of the exported script: how a torch-only script rebuilds the model.

The exported script (:func:`hookscope.core.export.export.standalone_script`) must run
where only torch is installed, so nothing here may leave a Hookscope import in
the text. Each spec kind is written the way a person would write it by hand:

* ``demo:NAME``: the demo's architecture as source (the classes it defines,
  copied with :func:`inspect.getsource`, or an ``nn.Sequential`` of built-in
  layers written from their ``extra_repr``) and its weights in the script's
  embedded payload (a base64 ``torch.save`` string written by :func:`hookscope.core.export.export.standalone_script`). The written
  source is executed here once and checked to give the same output as the
  demo, so a demo that cannot be written faithfully is refused, not exported wrong.
* ``path/file.py:factory``: the file imported by its absolute path (importlib).
* ``package.module:factory``: ``importlib.import_module``.
* ``model.pt2``: ``torch.export.load`` then ``torch.export.unflatten``.
* ``model.pt`` (trusted pickle): ``torch.load(..., weights_only=False)``.
* ``hf:FOLDER``: transformers' ``from_pretrained`` on the same folder (:mod:`.script_hf`).

A ``--weights`` file for a factory is read by the script itself (``.safetensors``
with safetensors, anything else with ``torch.load(weights_only=True)``); for a
demo the weights are already in its embedded state_dict.
"""

from __future__ import annotations

import inspect
import keyword
import math
import re
import sys
import textwrap
from collections import OrderedDict
from typing import Any

import torch
from torch import nn

from ..base.errors import HookscopeError
from ..base.nested import tensor_leaves
from ..base.call_args import call_model
from ..engine.forward_state import to_device
from .script_hf import hf_section
from .script_template import comment_text
from ..base.user_text import user_path


def model_section(spec: str, loaded: Any, weights: str | None,
                  probe: Any = None) -> tuple[str, dict[str, Any]]:
    """Source that defines ``model`` (eval mode, CPU), and what it needs in the payload.

    ``probe``: an input on which a demo's rebuilt architecture must give the demo's output."""
    spec = spec.strip()
    if spec.startswith("demo:"):
        return demo_section(spec, loaded.module, probe), {"state_dict": _cpu_state(loaded.module)}
    if spec.startswith("hf:"):
        return hf_section(spec, loaded), {}
    if spec.endswith(".pt2"):
        src = (f"# A torch.export program, unflattened so the original module paths (and hooks) exist.\n"
               f"model = torch.export.unflatten(torch.export.load({str(user_path(spec).resolve())!r}))\n")
        return src, {}
    if spec.endswith((".pt", ".pth")):
        src = ("# A fully pickled module: torch.load runs code stored in the file; only for files you trust.\n"
               f"model = torch.load({str(user_path(spec).resolve())!r}, map_location='cpu', "
               "weights_only=False)\n")
        return src, {}
    target, _, fname = spec.rpartition(":")
    if target.endswith(".py"):
        path = str(user_path(target).resolve())
        src = _IMPORT_FILE + f"model = module_of({_attribute(f'import_file({path!r})', fname)}())\n"
    else:
        src = ("import importlib\n\n" + _MODULE_OF
               + f"model = module_of({_attribute(f'importlib.import_module({target!r})', fname)}())\n")
    if weights:
        src += _LOAD_WEIGHTS + f"model.load_state_dict(read_state_dict({str(user_path(weights).resolve())!r}))\n"
    return src, {}


def _attribute(expr: str, name: str) -> str:
    """``expr.name`` when ``name`` is a plain ASCII identifier (Python would read it as written),
    else ``getattr(expr, 'name')``: a spec's text never becomes code of its own."""
    if name.isascii() and name.isidentifier() and not keyword.iskeyword(name):
        return f"{expr}.{name}"
    return f"getattr({expr}, {name!r})"


_MODULE_OF = '''
def module_of(made):
    """A factory returns a module or a (module, example_input) pair."""
    if isinstance(made, tuple) and len(made) == 2 and isinstance(made[0], torch.nn.Module):
        return made[0]
    return made


'''

_IMPORT_FILE = '''import importlib.util
import sys


def import_file(path):
    """Import a Python file by its path (as `python path` would see it, without running __main__)."""
    spec = importlib.util.spec_from_file_location("user_model", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses and pickling look modules up here
    spec.loader.exec_module(mod)
    return mod

''' + _MODULE_OF

_LOAD_WEIGHTS = '''
def read_state_dict(path):
    """A state_dict from .safetensors (needs safetensors) or .pt/.pth (tensors only, no code)."""
    if str(path).endswith(".safetensors"):
        from safetensors.torch import load_file
        return load_file(path)
    state = torch.load(path, map_location="cpu", weights_only=True)
    for key in ("state_dict", "model_state_dict", "model", "weights"):  # checkpoint wrappers
        if not all(isinstance(v, torch.Tensor) for v in state.values()) and isinstance(state.get(key), dict):
            state = state[key]
    return state


'''


def _cpu_state(module: nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.detach().cpu().clone() for k, v in module.state_dict().items()}


def demo_section(spec: str, module: nn.Module, probe: Any = None) -> str:
    """The demo's architecture as plain torch source defining ``model`` (weights loaded from
    the payload), checked here to rebuild a module that gives the same output."""
    classes: list[type] = []
    for m in reversed(list(module.modules())):  # children first: a class is defined before use
        cls = type(m)
        if not cls.__module__.startswith("torch.") and cls not in classes:
            classes.append(cls)
    try:
        sources = [textwrap.dedent(inspect.getsource(c)) for c in classes]
        defs = _constants(classes, sources) + "".join(s + "\n\n" for s in sources)
        src = defs + f"model = {_construct(module)}\n"
    except (OSError, TypeError, HookscopeError) as exc:
        raise HookscopeError(f"cannot write {spec}'s architecture as plain torch ({exc}); "
                             "export the model with torch.export to a .pt2 file and open that") from exc
    _check_rebuilds(spec, src, module, probe)
    return (f"# {comment_text(spec)}'s architecture, as Hookscope defines it; its weights are in "
            "PAYLOAD.\n"
            + src + "model.load_state_dict(PAYLOAD['state_dict'])\n")


def _constants(classes: list[type], sources: list[str]) -> str:
    """Module-level constants the classes' source names (``ALPHABET`` in a default argument),
    written as literals: plain strings, numbers and tuples of them only."""
    out: dict[str, str] = {}
    for cls, text in zip(classes, sources):
        glob = vars(sys.modules[cls.__module__]) if cls.__module__ in sys.modules else {}
        for name in re.findall(r"\b[A-Z][A-Z0-9_]+\b", text):
            v = glob.get(name)
            if name not in out and isinstance(v, (str, int, float, tuple)) and not isinstance(v, bool) \
                    and (not isinstance(v, tuple) or all(isinstance(i, (str, int, float)) for i in v)):
                out[name] = f"{name} = {v!r}\n"
    return "".join(out.values()) + ("\n" if out else "")


def _construct(m: nn.Module, indent: str = "") -> str:
    """Python that builds ``m`` (a custom class by its no-argument constructor), one child a line."""
    cls = type(m)
    if not cls.__module__.startswith("torch."):
        return f"{cls.__name__}()"
    if cls is nn.Sequential:
        inner = indent + "    "
        items = "".join(f"{inner}({name!r}, {_construct(child, inner)}),\n"
                        for name, child in m.named_children())
        return f"nn.Sequential(OrderedDict([\n{items}{indent}]))"
    if getattr(nn, cls.__name__, None) is cls and not list(m.children()):
        return f"nn.{cls.__name__}({m.extra_repr()})"
    raise HookscopeError(f"{cls.__name__} has no plain constructor to write")


def _check_rebuilds(spec: str, src: str, module: nn.Module, probe: Any) -> None:
    """Run the written source and compare the rebuilt model with the demo on ``probe``."""
    ns: dict[str, Any] = {"torch": torch, "nn": nn, "OrderedDict": OrderedDict, "math": math,
                          "__name__": "hookscope_script_check"}
    try:
        exec(compile(src, f"<{spec} architecture>", "exec"), ns)  # noqa: S102 - our own text
        rebuilt: nn.Module = ns["model"]
        rebuilt.load_state_dict(_cpu_state(module), strict=True)
        rebuilt.eval()
        same = [n for n, _ in rebuilt.named_modules()] == [n for n, _ in module.named_modules()]
        if same and probe is not None:
            dev = next((p.device for p in module.parameters()), torch.device("cpu"))
            with torch.inference_mode():
                want = tensor_leaves(call_model(module, to_device(probe, dev)))
                got = tensor_leaves(call_model(rebuilt, to_device(probe, torch.device("cpu"))))
            same = len(want) == len(got) and all(
                torch.equal(a.cpu(), b) for (_, a), (_, b) in zip(want, got))
    except Exception as exc:
        raise HookscopeError(f"cannot write {spec}'s architecture as plain torch: the written "
                             f"source fails with {type(exc).__name__}: {exc}") from exc
    if not same:
        raise HookscopeError(f"cannot write {spec}'s architecture as plain torch: the rebuilt "
                             "model differs from the demo (layer names or output); export the "
                             "model with torch.export to a .pt2 file and open that")
