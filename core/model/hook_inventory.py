"""Every hook on a model, listed: which module, which kind, which function, whose.

PyTorch keeps a module's hooks in private dicts (``_forward_hooks``,
``_forward_pre_hooks``, ``_backward_hooks``, ``_backward_pre_hooks``) and the
hooks that apply to every module in ``torch.nn.modules.module``'s globals.
:func:`list_hooks` reads them all (copies, never changes them) and tells for
each hook whether Hookscope registered it or the user did, so a forgotten or
leaked hook can be seen: a hook of Hookscope's still attached once a run has
ended is a bug (:func:`leaked_hooks`).

Pure Python over torch's module structures; never imports Qt.
"""

from __future__ import annotations

import functools
import inspect
from dataclasses import dataclass
from typing import Any, Callable

from torch import nn
from torch.nn.modules import module as _torch_module

#: (attribute on a module, kind shown) in the order a forward meets them.
MODULE_HOOK_DICTS = (
    ("_forward_pre_hooks", "forward pre-hook"),
    ("_forward_hooks", "forward hook"),
    ("_backward_pre_hooks", "backward pre-hook"),
    ("_backward_hooks", "backward hook"),
)
#: torch's hooks that run for every module, and their kinds.
GLOBAL_HOOK_DICTS = (
    ("_global_forward_pre_hooks", "global forward pre-hook"),
    ("_global_forward_hooks", "global forward hook"),
    ("_global_backward_pre_hooks", "global backward pre-hook"),
    ("_global_backward_hooks", "global backward hook"),
)
GLOBAL_PATH = "(every module)"
_PACKAGE = "hookscope"


@dataclass(frozen=True)
class HookInfo:
    """One registered hook.

    ``path`` is the module's path in the model (``""`` for the model itself,
    :data:`GLOBAL_PATH` for a global hook), ``kind`` one of the kinds of
    :data:`MODULE_HOOK_DICTS` / :data:`GLOBAL_HOOK_DICTS`, ``name`` the hook
    function's qualified name, ``file`` where it is defined (``line`` its first
    line, 0 if unknown), ``owner`` ``"hookscope"`` or ``"user"``, and
    ``handle_id`` the id torch gave its handle (its order of registration).
    """

    path: str
    kind: str
    name: str
    file: str
    line: int
    owner: str
    handle_id: int

    @property
    def is_hookscope(self) -> bool:
        return self.owner == "hookscope"


def _unwrap(fn: Any) -> Any:
    """The function behind a partial, a bound method or a callable object."""
    for _ in range(8):  # partial of a partial of a method...
        if isinstance(fn, functools.partial):
            fn = fn.func
        elif inspect.ismethod(fn):
            fn = fn.__func__
        else:
            break
    if not (inspect.isfunction(fn) or inspect.isbuiltin(fn)) and callable(fn):
        call = getattr(type(fn), "__call__", None)   # a hook object: its class says whose it is
        if inspect.isfunction(call):
            return type(fn)
    return fn


def describe(fn: Callable) -> tuple[str, str, int, str]:
    """``(name, file, line, owner)`` of a hook function (see :class:`HookInfo`)."""
    target = _unwrap(fn)
    name = getattr(target, "__qualname__", None) or getattr(target, "__name__", None) or repr(target)
    module = getattr(target, "__module__", "") or ""
    try:
        file = inspect.getsourcefile(target) or inspect.getfile(target)
    except (TypeError, OSError):
        file = ""
    try:
        line = inspect.getsourcelines(target)[1]
    except (TypeError, OSError):
        line = 0
    # Whose: the package the function (or the hook object's class) was defined in.
    ours = module.split(".")[0] == _PACKAGE
    return str(name), str(file), int(line), "hookscope" if ours else "user"


def _entries(path: str, hooks: dict, kind: str) -> list[HookInfo]:
    out = []
    # dict(...) is one atomic copy: a run on another thread may add or remove hooks meanwhile.
    for handle_id, fn in dict(hooks).items():
        name, file, line, owner = describe(fn)
        out.append(HookInfo(path, kind, name, file, line, owner, int(handle_id)))
    return out


def list_hooks(model: nn.Module, include_global: bool = True) -> list[HookInfo]:
    """Every forward, pre-forward and backward hook on ``model``'s modules, in
    module order, then torch's global module hooks (if ``include_global``).

    A module reached by two paths is listed once, under its first path.
    """
    out: list[HookInfo] = []
    for path, m in model.named_modules():
        for attr, kind in MODULE_HOOK_DICTS:
            hooks = getattr(m, attr, None)
            if hooks:
                out.extend(_entries(path, hooks, kind))
    if include_global:
        for attr, kind in GLOBAL_HOOK_DICTS:
            hooks = getattr(_torch_module, attr, None)
            if hooks:
                out.extend(_entries(GLOBAL_PATH, hooks, kind))
    return out


def leaked_hooks(model: nn.Module) -> list[HookInfo]:
    """Hookscope's hooks still attached to ``model`` (or globally): after a run
    has ended there must be none."""
    return [h for h in list_hooks(model) if h.is_hookscope]
