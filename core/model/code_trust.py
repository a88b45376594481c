"""Which code a model spec would run, and whether the person said yes to it.

A spec that names code runs that code when it loads: ``file.py:factory``
imports the file, ``package.module:callable`` imports the module, a fully
pickled ``model.pt``/``.pth`` unpickles it. Typed by the person (the command
line, File → Open model, :func:`~.sources.load_model`), such a spec runs as
asked, except a pickle, which still needs ``--trust-code``. Read from a file
someone may have sent (a session file, a recent-files entry, a dropped
file), the spec is *data*: its code runs only under a :class:`CodeTrust` that
names it, path and sha256, given by the person for that code (the window's
question, ``--trust-code`` on the command line). The sha256 covers every file
that importing the code could run, hashed together (:mod:`.code_unit`): the
factory's file, the ``__init__.py`` files of its package and the modules it can
import beside it. Any of them edited after the yes gives another hash, and is
asked about again.

Every check here runs before anything is imported: :func:`code_to_run` finds a
module's file with the import system's finders without importing it or its
packages, and refuses modules that are not a model's factory at all
(built-in, frozen, the standard library, Hookscope's own), so ``os:abort`` or
``pdb:set_trace`` is a message, never a call.
"""

from __future__ import annotations

import hashlib
import site
import sys
import sysconfig
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ..base.errors import SpecError
from ..base.regular_file import check_regular, open_regular
from ..base.user_text import shown, user_path
from .code_unit import unit_digest, unit_files

PYTHON_FILE = "Python file"
MODULE = "Python module"
PICKLE = "pickled model"
_NOT_CODE_PREFIXES = ("demo:", "hf:", "torchvision:", "timm:", "live:")  # live: names no code (refused by the loader)
_READ_CHUNK = 1 << 20


@dataclass(frozen=True)
class CodeToRun:
    """What loading a spec would run: ``kind`` (:data:`PYTHON_FILE`, :data:`MODULE`,
    :data:`PICKLE`), ``target`` (the file as named, or the module's name), ``origin``
    (the absolute path of the file whose code runs), ``sha256`` of every file the
    import could run, hashed together (:mod:`.code_unit`), ``count`` such files and
    ``folder``, the folder they lie in (``""``: the file alone).

    For a spec the person typed, nothing is hashed: ``sha256`` is ``""``, ``count`` 0."""

    kind: str
    target: str
    origin: str
    sha256: str
    count: int = 1
    folder: str = ""

    def describe(self) -> str:
        """One line naming the code, for a message or the window's question."""
        if self.kind == MODULE:
            return f"the {self.kind} {shown(self.target)} (file {shown(self.origin)})"
        return f"the {self.kind} {shown(self.origin)}"

    def scope(self) -> str:
        """What the hash covers, in words: ``"3 files under '/m', hashed together"``."""
        if not self.folder:
            return "1 file"
        files = "1 file" if self.count == 1 else f"{self.count} files"
        return f"{files} under {shown(self.folder)}, hashed together"


@dataclass(frozen=True)
class CodeTrust:
    """Which code a load may run.

    ``typed``: the person typed the spec, so a ``.py`` factory or a module runs as
    asked. ``everything``: ``--trust-code`` (pickles too). ``files``: exactly
    these files, at these hashes, said yes to for this load.
    """

    typed: bool = True
    everything: bool = False
    files: tuple[CodeToRun, ...] = ()

    @classmethod
    def from_data(cls, everything: bool = False) -> "CodeTrust":
        """The trust of a spec read from a file: none, unless ``--trust-code`` was given."""
        return cls(typed=False, everything=everything)

    def granting(self, code: CodeToRun) -> "CodeTrust":
        """This trust plus the person's yes for ``code`` (its path and hash)."""
        return replace(self, files=self.files + (code,))

    def allows(self, code: CodeToRun) -> bool:
        if self.everything or code in self.files:
            return True
        return self.typed and code.kind != PICKLE


class CodeTrustError(SpecError):
    """A spec whose code may not run without the person's yes; :attr:`code` says what
    would run, so the window can ask about exactly that file."""

    def __init__(self, message: str, code: CodeToRun | None = None) -> None:
        super().__init__(message)
        self.code = code

    def __reduce__(self) -> tuple[Any, ...]:  # crosses threads and processes whole
        return (type(self), (str(self), self.code))


def file_sha256(path: Path) -> str:
    """The sha256 of a regular file, read in chunks (a FIFO or a device is refused)."""
    h = hashlib.sha256()
    with open_regular(path, "model file", SpecError) as fh:
        try:
            while chunk := fh.read(_READ_CHUNK):
                h.update(chunk)
        except OSError as exc:
            raise SpecError(f"cannot read {shown(str(path))}: {exc.strerror or exc}") from exc
    return h.hexdigest()


def code_to_run(spec: str, hashed: bool = True) -> CodeToRun | None:
    """What loading ``spec`` would run, or ``None`` when it names no code (a demo, an
    adapter, a ``.pt2`` program). Raises :class:`SpecError` for a missing file, for
    a ``module:callable`` that cannot be a factory and for code beside too many files
    to hash (:mod:`.code_unit`); imports nothing. ``hashed=False``: the code's kind
    and file only (a typed spec, which runs as asked)."""
    spec = (spec or "").strip()
    if not names_code(spec):
        return None
    if spec.endswith((".pt", ".pth")):
        return _file_code(PICKLE, spec, hashed)
    target, _, fname = spec.rpartition(":")
    if target.endswith(".py"):
        return _file_code(PYTHON_FILE, target, hashed)
    origin, top = _module_files(target, fname)
    if not hashed:
        return CodeToRun(MODULE, target, origin, "", 0)
    if top is None:  # a top-level module in a site-packages folder: its file alone
        return CodeToRun(MODULE, target, origin, file_sha256(Path(origin)))
    return _unit_code(MODULE, target, Path(origin), *top)


def names_code(spec: str) -> bool:
    """Whether ``spec``'s form names code that loading it would run (a ``.py`` factory, a
    module, a pickle), read from the text alone: nothing is looked up, read or hashed."""
    spec = (spec or "").strip()
    if not spec or spec.startswith(_NOT_CODE_PREFIXES) or spec.endswith(".pt2"):
        return False
    if spec.endswith((".pt", ".pth")):
        return True
    target, sep, _ = spec.rpartition(":")
    return bool(sep and target)


def check_trust(spec: str, trust: CodeTrust) -> CodeToRun | None:
    """What ``spec`` would run, after checking ``trust`` allows it; raises
    :class:`CodeTrustError` (naming the code, before anything runs) when it does not."""
    light = code_to_run(spec, hashed=False)
    if light is None or trust.everything or (trust.typed and light.kind != PICKLE):
        return light  # runs as asked (typed, --trust-code): no hash to compare with
    code = code_to_run(spec)
    assert code is not None
    if trust.allows(code):
        return code
    changed = [c for c in trust.files if c.origin == code.origin]
    if changed:
        raise CodeTrustError(f"{code.describe()} or the code beside it changed after you said "
                             f"yes to it ({code.scope()}: sha256 now {code.sha256[:16]}…); "
                             "nothing was run: open it again to be asked", code)
    if code.kind == PICKLE and trust.typed:
        raise CodeTrustError(f"{Path(code.origin).name} would be loaded as a full pickle, which "
                             "runs code stored in the file. Pass --trust-code only if you trust "
                             "its source; better, export it with torch.export (.pt2) or use "
                             "file.py:factory with --weights.", code)
    raise CodeTrustError(f"the model {shown(spec)} runs code: {code.describe()} and what it "
                         f"can import beside it ({code.scope()}: sha256 {code.sha256[:16]}…). "
                         "It was named by a session file, a recent entry "
                         "or a dropped file, which are data, so nothing was run: pass "
                         "--trust-code (in the window, answer Run) only if you trust that file",
                         code)


def _file_code(kind: str, name: str, hashed: bool = True) -> CodeToRun:
    try:
        absolute = user_path(name).resolve()
    except (OSError, ValueError, RuntimeError) as exc:
        raise SpecError(f"model file {shown(name)} does not exist") from exc
    if kind == PICKLE:  # unpickling imports installed code only: the file is the unit
        return CodeToRun(kind, name, str(absolute), file_sha256(absolute) if hashed else "",
                         int(hashed))
    check_regular(absolute, "model file", SpecError)  # a FIFO: refused, named
    if not hashed:
        return CodeToRun(kind, name, str(absolute), "", 0)
    return _unit_code(kind, name, absolute, absolute.parent, "")


def _unit_code(kind: str, target: str, origin: Path, folder: Path, prefix: str) -> CodeToRun:
    """``origin``'s code with every file importable from ``folder`` (see :mod:`.code_unit`)."""
    files = unit_files(folder, prefix)
    if not any(p.resolve() == origin.resolve() for _, p, _ in files):  # e.g. a FIFO's name
        check_regular(origin, "model file", SpecError)
        raise SpecError(f"{shown(str(origin))} cannot be imported from {shown(str(folder))}; "
                        "nothing was run")
    return CodeToRun(kind, target, str(origin), unit_digest(folder, files), len(files),
                     str(folder))


# -- package.module:callable ----------------------------------------------------
def module_origin(name: str, fname: str) -> str:
    """The file ``package.module`` would be imported from, found without importing it or
    its packages; raises :class:`SpecError` for a module that is no model's factory
    (built-in, frozen, standard library, Hookscope's own) or a private callable."""
    return _module_files(name, fname)[0]


def _module_files(name: str, fname: str) -> tuple[str, tuple[Path, str] | None]:
    """:func:`module_origin`'s file, and the folder (with the relative paths' prefix) whose
    importable files a yes covers: the top-level package's folder; for a module outside
    any package, its own folder, or ``None`` in a site-packages folder (the file alone)."""
    parts = name.split(".")
    if not all(p.isidentifier() for p in parts):
        raise SpecError(f"{shown(name)} is not a module name: give package.module:factory, "
                        "or a path ending in .py")
    if not fname.isidentifier():
        raise SpecError(f"{shown(fname)} in {shown(name + ':' + fname)} is not a function name")
    refuse = shown(name + ":" + fname)
    stdlib = (f"{refuse} is in the Python standard library, not a model factory; nothing was "
              "imported or called: name a function in your own module or file")
    top = parts[0]
    if top in sys.builtin_module_names or top in sys.stdlib_module_names or top == "__main__":
        raise SpecError(stdlib)
    if top == "hookscope":
        raise SpecError(f"{refuse} is Hookscope's own code, not a model factory; nothing was "
                        "imported or called (for a built-in model use demo:NAME)")
    if fname.startswith("_"):
        raise SpecError(f"{refuse} names a private name; a factory is a public function or "
                        "class of its module. Nothing was imported or called")
    spec = _find_spec_without_import(name)
    origin = getattr(spec, "origin", None)
    if not origin or origin in ("built-in", "frozen") or not getattr(spec, "has_location", False):
        raise SpecError(f"{refuse} names a module with no file of its own (built-in, frozen "
                        "or a namespace), not a model factory; nothing was imported")
    if _in_stdlib(Path(origin)):
        raise SpecError(stdlib)
    return str(Path(origin).resolve()), _top_folder(Path(origin), parts)


def _top_folder(origin: Path, parts: list[str]) -> tuple[Path, str] | None:
    """The folder of the top-level package of module ``parts`` found at ``origin``, with
    the package's name as the relative paths' prefix (see :func:`_module_files`)."""
    here = origin.parent if origin.name.startswith("__init__.") else origin
    if here is origin and len(parts) == 1:  # a module of its own, in some folder on sys.path
        folder = origin.parent.resolve()
        return None if folder.name in ("site-packages", "dist-packages") else (folder, "")
    top = here.parents[len(parts) - 2] if len(parts) > 1 else here
    if top.name != parts[0]:  # a loader with its own layout: the module's own folder
        return origin.parent.resolve(), ""
    return top.resolve(), parts[0] + "/"


def _find_spec_without_import(name: str) -> Any:
    """The module spec the import system would use for ``name``; its parent packages are
    looked up by their search paths, never imported (their ``__init__`` is code too)."""
    path: Any = None
    found: Any = None
    parts = name.split(".")
    for i in range(len(parts)):
        full = ".".join(parts[: i + 1])
        loaded = sys.modules.get(full)
        found = getattr(loaded, "__spec__", None) if loaded is not None else None
        if found is None:
            for finder in sys.meta_path:
                find = getattr(finder, "find_spec", None)
                if find is None:
                    continue
                try:
                    found = find(full, path)
                except (ImportError, ValueError, OSError):
                    found = None
                if found is not None:
                    break
        if found is None:
            raise SpecError(f"no module named {shown(full)} can be imported; check the name, or "
                            "give a path ending in .py")
        if i < len(parts) - 1:
            path = getattr(loaded, "__path__", None) or found.submodule_search_locations
            if path is None:
                raise SpecError(f"{shown(full)} is a module, not a package: {shown(name)} "
                                "cannot be inside it")
    return found


def _in_stdlib(origin: Path) -> bool:
    """Whether ``origin`` lies in the standard library's folders (not in a site-packages)."""
    paths = sysconfig.get_paths()
    std = {paths.get("stdlib"), paths.get("platstdlib")}
    sites = {paths.get("purelib"), paths.get("platlib"), *site.getsitepackages()}
    if site.ENABLE_USER_SITE:
        sites.add(site.getusersitepackages())
    resolved = origin.resolve()

    def under(folders: set) -> bool:
        for f in folders:
            if f and resolved.is_relative_to(Path(f).resolve()):
                return True
        return False

    in_site = any(part in ("site-packages", "dist-packages") for part in resolved.parts)
    return under(std) and not in_site and not under(sites)
