"""An output never replaces a file the same command reads.

``--save-captures w.safetensors --weights w.safetensors`` or
``--export-script net.py`` with the model ``net.py:build`` would silently put
the output where the input was. :func:`files_read` declares what a setup will
read (the model file or folder, the imported module's file, weights, the input
and every source/reference input that names a file, the labels file, the
session file) in a :class:`~.read_files.ReadFiles`, beside what the openers
recorded as they read; :func:`refuse_overwrite` raises a :class:`HookscopeError`
before anything is written when an output is one of them. Files are compared by
identity (device and inode, following symlinks), so a symlink, a hard link or
another spelling of the same path is caught too; an output that would land
inside a folder read (``hf:DIR``, an SAE folder) on one of its files is refused
as well.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Iterable

from .errors import HookscopeError
from .read_files import ReadFiles, recording_reads
from .user_text import user_path


def files_read(spec: str | None = None, weights: str | None = None,
               inputs: Iterable[Any] = (), labels: str | None = None,
               session: str | None = None, plan: Any = None,
               more: Iterable[tuple[str, Any]] = (),
               into: ReadFiles | None = None) -> ReadFiles:
    """Every existing file or folder the setup reads, declared in ``into`` (default: the
    registry recording in this thread, else a new one); ``more``: ``(what, path)`` pairs."""
    found = into if into is not None else (recording_reads() or ReadFiles())

    def add(what: str, text: Any) -> None:
        if isinstance(text, (str, Path)) and str(text).strip():
            for p in _candidates(str(text).strip()):
                found.add(what, p)

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
            try:
                add("a source input file", iv.pre_pass_input())
            except HookscopeError:  # a bare patch not bound yet: refused where it runs
                pass
    add("the labels file", labels)
    add("the session file", session)
    for what, text in more:
        add(what, text)
    return found


def refuse_overwrite(outputs: Iterable[tuple[str, Any]], reads: ReadFiles,
                     reader: str = "this command") -> None:
    """A :class:`HookscopeError` (nothing written) when an output ``(flag, path)`` is, or lies
    in a folder read on, a file that ``reads`` holds; ``reader`` says who reads them."""
    reads.refuse(outputs, reader)


def _candidates(text: str) -> list[Path]:
    out = [user_path(text)]
    if text.endswith(":invert"):  # an image input, inverted
        out.append(user_path(text.removesuffix(":invert")))
    return out
