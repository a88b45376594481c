"""An output never replaces a file the same command reads.

``--save-captures w.safetensors --weights w.safetensors`` or
``--export-script net.py`` with the model ``net.py:build`` would silently put
the output where the input was. :func:`files_read` lists what a setup reads
(the model file or folder, the imported module's file, weights, the input and
every source/reference input that names a file, the labels file, the session
file); :func:`refuse_overwrite` raises a :class:`HookscopeError` before
anything is written when an output is one of them. Files are compared by
identity (device and inode, following symlinks), so a symlink, a hard link or
another spelling of the same path is caught too; an output that would land
inside a model folder (``hf:DIR``) on one of its files is refused as well.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any, Iterable

from .errors import HookscopeError
from .user_text import shown, user_path


def files_read(spec: str | None = None, weights: str | None = None,
               inputs: Iterable[Any] = (), labels: str | None = None,
               session: str | None = None, plan: Any = None) -> list[tuple[str, Path]]:
    """``(what, path)`` for every existing file or folder the setup reads."""
    found: list[tuple[str, Path]] = []

    def add(what: str, text: Any) -> None:
        if isinstance(text, (str, Path)) and str(text).strip():
            found.extend((what, p) for p in _candidates(str(text).strip()) if _exists(p))

    if spec:
        spec = spec.strip()
        add("the model file", spec)
        target = spec.rpartition(":")[0]
        add("the model file", target)
        add("the model folder", spec.removeprefix("hf:"))
        module = sys.modules.get(target)  # package.module:factory, once imported
        if module is not None and getattr(module, "__file__", None):
            add("the model's module", module.__file__)
    add("the --weights file", weights)
    for text in inputs:
        add("the input file", text)
    if plan is not None:
        for iv in plan.all_interventions().values():
            add("a source input file", iv.pre_pass_input())
    add("the labels file", labels)
    add("the session file", session)
    return found


def refuse_overwrite(outputs: Iterable[tuple[str, Any]], reads: list[tuple[str, Path]],
                     reader: str = "this command") -> None:
    """A :class:`HookscopeError` (nothing written) when an output ``(flag, path)`` is, or lies
    in a model folder on, a file that ``reads`` lists; ``reader`` says who reads them."""
    for flag, out in outputs:
        if not out:
            continue
        target = user_path(str(out))
        for what, read in reads:
            if _same(target, read) or (read.is_dir() and _inside(target, read)):
                raise HookscopeError(f"{flag} {shown(str(out))} would overwrite {what} {reader} "
                                     f"reads ({shown(str(read))}); write to another file")


def _candidates(text: str) -> list[Path]:
    out = [user_path(text)]
    if text.endswith(":invert"):  # an image input, inverted
        out.append(user_path(text.removesuffix(":invert")))
    return out


def _exists(path: Path) -> bool:
    try:
        return path.exists()
    except (OSError, ValueError):  # a name the OS cannot look up
        return False


def _identity(path: Path) -> tuple[int, int] | None:
    try:
        st = os.stat(path)  # follows symlinks: a link to the input is the input
    except (OSError, ValueError):
        return None
    return st.st_dev, st.st_ino


def _same(a: Path, b: Path) -> bool:
    ia = _identity(a)
    return ia is not None and ia == _identity(b)


def _inside(target: Path, folder: Path) -> bool:
    """Whether ``target`` exists as a file somewhere under ``folder``."""
    if not _exists(target) or target.is_dir():
        return False
    folder_id = _identity(folder)
    try:
        parents = user_path(target).resolve().parents
    except (OSError, RuntimeError, ValueError):
        return False
    return any(_identity(p) == folder_id for p in parents)
