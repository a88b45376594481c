"""Where a model comes from: a *model spec* string resolved to a module and an example input.

==============================  ===========================================
``demo:NAME``                   a built-in demo (clamp, features, cnn, transformer, lm, detector)
``path/to/file.py:factory``     a factory in a Python file
``package.module:factory``      a factory in an importable module
``model.pt2``                   a ``torch.export`` program, unflattened so the
                                original module paths exist and hooks fire
``hf:NAME_OR_DIR``              a Hugging Face model (:mod:`.source_hf`)
``torchvision:NAME``            a torchvision model (:mod:`.source_vision`)
``timm:NAME``                   a timm model (:mod:`.source_vision`)
``model.pt`` (trusted only)     a fully pickled module: runs code from the file,
                                so only with ``trust_pickle=True``
==============================  ===========================================

A factory returns a module or ``(module, example_input)``. ``weights=`` loads
a state_dict into the factory's module (:mod:`.weights`).

Specs that run code are checked by :mod:`.code_trust` before anything is
imported: a ``module:callable`` must be a public function or class written in
the named module's own package, which is not built-in or the standard library,
and a spec read from a file (a session, a recent entry, a dropped file) runs
only under a :class:`~.code_trust.CodeTrust` that names its files and their
combined hash. Factory code is imported from source, never from a bytecode
cache (:func:`~.code_unit.source_only`).
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import sys
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn

from ..demos.demo_lm import demo_meaning
from ..demos.demo_models import DEMO_DESCRIPTIONS, DEMOS
from .code_trust import CodeToRun, CodeTrust, CodeTrustError, check_trust, code_to_run
from .code_unit import source_only
from ..base.errors import SpecError
from .user_code import user_code
from ..base.user_text import is_file, shown, user_path
from .exported_load import load_exported_program, quiet_torch_export
from ..base.meaning import OutputMeaning
from .model_kinds import prepare_loaded, refuse_torchscript_file
from .source_adapters import ADAPTER_PREFIXES, load_adapter
from .weights import apply_weights
from .loaded_model import LoadedModel

SPEC_HELP = ("use demo:NAME, path/to/file.py:factory, package.module:factory, "
             "hf:NAME_OR_DIR, torchvision:NAME, timm:NAME, or a torch.export .pt2 file")


def load_model(spec: str, weights: str | None = None, trust_pickle: bool = False,
               trust: CodeTrust | None = None) -> LoadedModel:
    """Resolve ``spec`` to a :class:`LoadedModel`; raise :class:`SpecError` saying what to fix.

    ``trust`` says which code the load may run (:mod:`.code_trust`); by default the
    spec counts as typed by the person, and ``trust_pickle`` (``--trust-code``)
    allows pickles too. A spec read from a file passes ``CodeTrust.from_data()``.
    """
    spec = (spec or "").strip()
    if trust is None:
        trust = CodeTrust(typed=True, everything=trust_pickle)
    if not spec:
        raise SpecError("no model given: " + SPEC_HELP)
    if spec.startswith("live:"):
        raise SpecError(f"{shown(spec)} names a model that was built in a Python session and is "
                        "not in any file: pass the model itself (explore(model), "
                        "Session.from_module(model)); a session file's plan still applies "
                        "(plan=read_session_file(path).plan)")
    if spec.startswith("demo:"):
        lm = _load_demo(spec)
    elif spec.startswith(ADAPTER_PREFIXES):
        lm = load_adapter(spec)
    elif spec.endswith(".pt2"):
        lm = _load_exported(spec, trust.everything)
    elif spec.endswith((".pt", ".pth")):
        refuse_torchscript_file(spec)  # a clear word for torch.jit.save files, trusted or not
        lm = _load_pickle(spec, trust)
    elif ":" in spec:
        lm = _load_factory(spec, trust)
    elif spec.endswith(".py"):
        raise SpecError(f"{shown(spec)} names a file but no factory: write {shown(spec + ':NAME')}, where NAME is a "
                        "function in the file that returns the model")
    else:
        raise SpecError(f"cannot tell what model {shown(spec)} is: " + SPEC_HELP)
    prepare_loaded(lm)  # TorchScript refused, torch.compile unwrapped, lazy modules materialised
    if weights:
        if lm.kind in ("export",):
            raise SpecError("an exported .pt2 program carries its own weights; drop --weights")
        apply_weights(lm.module, weights)
        lm.weights = weights
    lm.module.eval()
    return lm


def demo_names() -> list[str]:
    return list(DEMOS)


def _load_demo(spec: str) -> LoadedModel:
    name = spec.removeprefix("demo:")
    if name not in DEMOS:
        raise SpecError(f"unknown demo {shown(name)}: choose one of "
                        + ", ".join(f"demo:{n}" for n in DEMOS))
    module, example = DEMOS[name]()
    return LoadedModel(module, example, spec, "demo", DEMO_DESCRIPTIONS.get(name, ""),
                       meaning=demo_meaning(name))


def _load_exported(spec: str, trust: bool = False) -> LoadedModel:
    path = user_path(spec)
    if not is_file(path):
        raise SpecError(f"exported program {shown(spec)} does not exist")
    ep = load_exported_program(path, trust_pickle=trust)  # never unpickles unless trusted
    try:
        with quiet_torch_export():  # torch's own deprecation notices are not the user's business
            module = torch.export.unflatten(ep)
    except Exception as exc:
        raise SpecError(f"{path.name} loaded but could not be unflattened into its module tree: "
                        f"{exc}") from exc
    args, kwargs = ep.example_inputs if _args_kwargs(ep.example_inputs) else ((), {})
    example: Any = args[0] if len(args) == 1 and not kwargs else (kwargs if not args else tuple(args))
    return LoadedModel(module, example, spec, "export", f"torch.export program {path.name}")


def _args_kwargs(value: Any) -> bool:
    """Whether a program's example inputs have the (args tuple, kwargs dict) form torch writes;
    anything else (a damaged or hand-made file) means no example input."""
    return (isinstance(value, tuple) and len(value) == 2 and isinstance(value[0], tuple)
            and isinstance(value[1], dict))


def _load_pickle(spec: str, trust: CodeTrust) -> LoadedModel:
    path = user_path(spec)
    if not is_file(path):
        raise SpecError(f"model file {shown(spec)} does not exist")
    check_trust(spec, trust)  # nothing is unpickled without the person's yes
    try:
        module = torch.load(path, map_location="cpu", weights_only=False)
    except Exception as exc:
        raise SpecError(f"cannot unpickle {path.name}: {exc}") from exc
    if not isinstance(module, nn.Module):
        raise SpecError(f"{path.name} holds a {type(module).__name__}, not a model; if it is a "
                        "state_dict, load it with file.py:factory --weights")
    return LoadedModel(module, None, spec, "pickle", f"pickled module {path.name}")


def _load_factory(spec: str, trust: CodeTrust) -> LoadedModel:
    target, _, fname = spec.rpartition(":")
    if not fname.isidentifier():
        raise SpecError(f"{shown(fname)} in {shown(spec)} is not a function name: " + SPEC_HELP)
    if target.endswith(".py") and not is_file(user_path(target)):
        raise SpecError(f"model file {shown(target)} does not exist")
    # the module's origin is checked (not the standard library...) and the person's yes
    # is checked, both before anything is imported
    code = check_trust(spec, trust)
    if target.endswith(".py"):
        pymod = _import_file(user_path(target), code, spec)
    else:
        try:
            with user_code(f"importing {target}", target), source_only():
                _same_code(spec, code)  # checked again just before the import reads the files
                pymod = importlib.import_module(target)
        except SpecError:
            raise
        except ModuleNotFoundError as exc:
            raise SpecError(f"no module named {shown(target)} can be imported; check the name, or "
                            "give a path ending in .py") from exc
        except Exception as exc:
            raise SpecError(_import_failure(target, exc)) from exc
    factory = getattr(pymod, fname, None)
    if not target.endswith(".py") and callable(factory) and not _defined_in(factory, target):
        where = getattr(factory, "__module__", None)
        raise SpecError(f"{shown(spec)} names {type(factory).__name__} {fname}, which is "
                        + (f"defined in {shown(where)}, " if isinstance(where, str) else "")
                        + f"outside {target.split('.')[0]}: a factory is a function or class "
                        "written in the named module's own package. Nothing was called")
    if not callable(factory):
        options = [n for n, v in vars(pymod).items()
                   if callable(v) and not n.startswith("_") and getattr(v, "__module__", None) == pymod.__name__]
        raise SpecError(f"{target} has no function {shown(fname)}"
                        + (f"; it defines {', '.join(options[:10])}" if options else ""))
    try:
        with user_code(f"factory {fname}() in {target}", target), source_only():
            made = factory()  # what it imports on the way is read from source too
    except SpecError:
        raise
    except Exception as exc:
        raise SpecError(f"factory {fname}() in {target} raised {type(exc).__name__}: {exc}"
                        f"{_where(exc)}") from exc
    example = None
    if isinstance(made, tuple) and len(made) == 2 and isinstance(made[0], nn.Module):
        made, example = made
    if not isinstance(made, nn.Module):
        raise SpecError(f"factory {fname}() returned {type(made).__name__}; it must return an "
                        "nn.Module or a (module, example_input) pair")
    return LoadedModel(made, example, spec, "factory", f"{fname}() from {target}")


def _defined_in(obj: object, target: str) -> bool:
    """Whether ``obj`` is a function or class written in module ``target``'s own package
    tree (``torchvision.models:resnet18`` is defined in ``torchvision.models.resnet``);
    a built-in, or anything re-exported from elsewhere (``os.abort``), is not."""
    top = target.split(".")[0]
    where = getattr(obj, "__module__", None)
    return ((inspect.isfunction(obj) or inspect.isclass(obj)) and isinstance(where, str)
            and (where == top or where.startswith(top + ".")))


def _same_code(spec: str, code: CodeToRun | None) -> None:
    """Refuse when the files ``code`` hashed changed since the yes was checked."""
    if code is None or not code.sha256:
        return  # typed, or --trust-code: runs as asked
    now = code_to_run(spec)
    if now != code:
        raise CodeTrustError(f"{code.describe()} or the code beside it changed while it was "
                             "being opened; nothing was run: open it again", now or code)


def _import_file(path: Path, code: CodeToRun | None = None, model_spec: str = ""):
    """Import the Python file ``path`` from the bytes read here, after checking that the
    files ``code`` hashed are unchanged, when given (code changed after the person's yes
    is not run). What the file imports is read from source, never from a ``.pyc``."""
    if not is_file(path):
        raise SpecError(f"model file {shown(str(path))} does not exist")
    try:
        source = path.read_bytes()
    except OSError as exc:
        raise SpecError(f"cannot read {shown(str(path))}: {exc.strerror or exc}") from exc
    _same_code(model_spec, code)
    name = f"hookscope_user_{abs(hash(str(path.resolve())))}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise SpecError(f"cannot import {path} as Python")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod  # dataclasses and pickling look modules up here
    try:
        with user_code(f"importing {path.name}", str(path)), source_only():  # clean argv, no exit
            exec(compile(source, str(path), "exec", dont_inherit=True), mod.__dict__)
    except SpecError:
        sys.modules.pop(name, None)
        raise
    except SyntaxError as exc:
        sys.modules.pop(name, None)
        raise SpecError(f"syntax error in {path.name} line {exc.lineno}: {exc.msg}") from exc
    except Exception as exc:
        sys.modules.pop(name, None)
        raise SpecError(_import_failure(str(path), exc)) from exc
    return mod


def _import_failure(target: str, exc: Exception) -> str:
    return f"importing {target} failed with {type(exc).__name__}: {exc}{_where(exc)}"


def _where(exc: BaseException) -> str:
    """' (file.py line N)' for the innermost frame of the user's code."""
    frames = traceback.extract_tb(exc.__traceback__)
    if not frames:
        return ""
    f = frames[-1]
    return f" ({Path(f.filename).name} line {f.lineno})"
