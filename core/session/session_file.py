"""Session files: ``*.hookscope.json``, a session saved and reopened with the same numbers.

One JSON object::

    {"format": "hookscope-session", "version": 1,
     "model": {"spec": "net.py:make", "weights": "net.safetensors", "labels": "classes.txt"},
     "input": {"text": "digits.npy", "file": true},
     "device": "cpu",
     "plan": {"capture": ["conv1", "fc"], "keep_tensors": true,
              "interventions": {"conv2": {"kind": "zero"}, "conv1": {"kind": "clamp", "lo": null, "hi": 0.5}}},
     "options": {"stats_only": false, "train": false, "live": false},
     "view": {"selected": "conv1"}}

``saes`` and ``views`` (optional): the SAEs attached to layers and the open LM views'
settings (:mod:`.session_lm`; version 2).

``model.labels`` (optional) is a labels file naming the output's classes.
``scan`` (optional), ``{"file": "NAME.hookscope.scan.json", "sha256": ...}``, names the
sidecar holding the session's scan result (:mod:`.scan_sidecar`); one that cannot be read
leaves :attr:`SessionSetup.scan_note` and the session still opens.
Paths (a factory's ``.py`` file, a ``.pt2``/``.pt`` model, weights, labels, an
input file) are written relative to the session file's folder when they lie under
it, and a relative path read back resolves against that folder, so a folder
holding a model, its weights, its inputs and a session can be moved whole.
Non-finite numbers are written as the strings ``"inf"``, ``"-inf"``, ``"nan"``
(JSON has no such numbers). Reading checks everything before anything is
used: a damaged or foreign file raises :class:`SessionFileError` with what is
wrong, and the caller's session is untouched. A session file is data: it never
grants trust, and a model spec in it that runs code (a ``.py`` factory, a module,
a pickle) runs only after the person's yes for that file (:mod:`.code_trust`).
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..base.json_safe import nesting_depth
from ..base.atomic_write import write_text
from ..base.errors import HookscopeError
from ..plan.plan import Plan
from ..base.regular_file import read_regular
from .scan_sidecar import SavedScan, SidecarError, read_sidecar, write_sidecar
from .session_lm import SaeEntry, lm_to_dict, saes_from_dict, views_from_dict
from .session_types import Options

FORMAT = "hookscope-session"
VERSION = 2  # 2: saes and views (a version-1 file reads as before)
SUFFIX = ".hookscope.json"
MAX_BYTES = 16 * 1024 * 1024
#: How deep the ``view`` object may nest: the window writes two or three levels.
MAX_VIEW_DEPTH = 32
_PATH_SUFFIXES = (".py", ".pt2", ".pt", ".pth")


class SessionFileError(HookscopeError):
    """A session file that cannot be read: not JSON, not Hookscope's, or damaged."""


@dataclass
class SessionSetup:
    """What a session file describes, paths resolved (see :meth:`Session.open_setup`)."""

    spec: str
    weights: str | None = None
    input_text: str = "example"
    device: str = "cpu"
    plan: Plan = field(default_factory=Plan)
    options: Any = None   # session.Options
    view: dict = field(default_factory=dict)
    trust_pickle: bool = False  # never read from a file, never used to load: a file cannot trust itself
    labels: str | None = None
    #: the scan result its sidecar file holds (:mod:`.scan_sidecar`), or why it is not shown
    scan: SavedScan | None = None
    scan_note: str | None = None
    #: the SAEs to attach, by layer (each already read, :mod:`.session_lm`), and the LM views
    saes: dict[str, SaeEntry] = field(default_factory=dict)
    views: tuple = ()


def _encode(v: Any) -> Any:
    """``v`` with non-finite floats as strings (JSON has no such numbers)."""
    if isinstance(v, float) and not math.isfinite(v):
        return "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf")
    if isinstance(v, (list, tuple)):
        return [_encode(x) for x in v]
    if isinstance(v, dict):
        return {str(k): _encode(x) for k, x in v.items()}
    return v


# -- paths ----------------------------------------------------------------------
def _rel(path: str, base: Path) -> str:
    """``path`` relative to ``base`` when it lies under it, else absolute."""
    p = Path(path).expanduser().resolve()
    try:
        return p.relative_to(base).as_posix()
    except ValueError:
        return str(p)


def _abs(path: str, base: Path) -> str:
    try:  # "~nobody/x.pt" names a user who is not there; a NUL names no file at all
        p = Path(path).expanduser()
    except (RuntimeError, ValueError) as exc:
        raise SessionFileError(f"the path {_short(path)} names no file: {exc}") from exc
    return str(p if p.is_absolute() else base / p)


def _spec_path(spec: str) -> tuple[str, str, str] | None:
    """``(before, path, after)`` when the spec names a file, else ``None``."""
    if spec.endswith(_PATH_SUFFIXES[1:]):
        return "", spec, ""
    target, sep, fname = spec.rpartition(":")
    if sep and target.endswith(".py"):
        return "", target, sep + fname
    return None


def _map_spec(spec: str, fn) -> str:
    parts = _spec_path(spec)
    return spec if parts is None else parts[0] + fn(parts[1]) + parts[2]


# -- writing ----------------------------------------------------------------------
def session_to_dict(session: Any, base: Path, model: dict | None = None,
                    input_text: str | None = None) -> dict:
    """The JSON object for ``session`` (a :class:`~hookscope.core.Session`), paths under ``base``.

    ``model``: the model entry to write instead of the model's own spec (a live model's,
    :mod:`.live_save`; its ``weights`` and ``weights_file`` paths are written under ``base``);
    ``input_text``: the file to write as the input instead of the session's (its example,
    saved beside: it may still be a temporary waiting to land with this file).
    """
    if session.model is None:
        raise HookscopeError("nothing to save: no model is open")
    lm = session.model
    if model is not None:
        model = {k: (_rel(v, base) if k in ("weights", "weights_file") and v else v)
                 for k, v in model.items()}
    text = input_text or session.input_text or "example"
    is_file = input_text is not None or Path(text).expanduser().is_file()
    plan = session.plan
    return {
        "format": FORMAT,
        "version": VERSION,
        "model": model or {"spec": _map_spec(lm.spec, lambda p: _rel(p, base)),
                           "weights": _rel(lm.weights, base) if lm.weights else None,
                           **({"labels": _rel(session.labels, base)} if session.labels else {})},
        "input": {"text": _rel(text, base) if is_file else text, "file": is_file},
        "device": session.device,
        "plan": plan.to_dict(),
        "options": dataclasses.asdict(session.options),
        "view": _encode(dict(session.view)),
        **lm_to_dict(session.saes, session.derived, lambda p: _rel(p, base)),
    }


def write_session_file(path: str | Path, session: Any, model: dict | None = None,
                       input_text: str | None = None) -> Path:
    """Write ``session`` to ``path`` atomically (a temporary file, then a rename);
    ``model`` and ``input_text`` as in :func:`session_to_dict`."""
    path = Path(path).expanduser()
    folder = path.resolve().parent
    if not folder.is_dir():
        raise HookscopeError(f"cannot save the session to {path}: the folder {path.parent} "
                             "does not exist")
    try:
        d = session_to_dict(session, folder, model, input_text)
        text = json.dumps(d, indent=1, allow_nan=False) + "\n"
    except RecursionError as exc:  # a view set from a script, nested thousands deep
        raise HookscopeError(f"cannot save the session to {path}: its view is nested too deeply "
                             f"to write (at most {MAX_VIEW_DEPTH} levels); reset the view") from exc
    if session.saved_scan is not None:  # the sidecar first: the session names its hash
        try:
            d["scan"] = write_sidecar(path, session.saved_scan)
        except HookscopeError as exc:
            raise HookscopeError(f"cannot save the session to {path}: {exc}") from exc
        text = json.dumps(d, indent=1, allow_nan=False) + "\n"
    try:
        write_text(path, text)  # whole or not at all
    except HookscopeError as exc:
        raise HookscopeError(f"cannot save the session to {path}: {exc}") from exc
    return path


# -- reading ----------------------------------------------------------------------
def _short(v: Any) -> str:
    r = repr(v)
    return r if len(r) <= 60 else r[:57] + "..."


def _get(d: dict, key: str, typ: type, where: str, default: Any = ...) -> Any:
    if key not in d or d[key] is None:
        if default is ...:
            raise SessionFileError(f"{where}.{key} is missing")
        return default
    v = d[key]
    if not isinstance(v, typ) or (isinstance(v, bool) and typ is not bool):
        raise SessionFileError(f"{where}.{key} has the wrong type: {_short(v)}")
    return v


def setup_from_dict(d: Any, base: Path) -> SessionSetup:
    """Check a parsed session file and build its :class:`SessionSetup` (raises :class:`SessionFileError`)."""
    if not isinstance(d, dict) or d.get("format") != FORMAT:
        raise SessionFileError("this is not a Hookscope session file (it has no "
                               f"\"format\": \"{FORMAT}\"); save one with File → Save session "
                               "or --save-session")
    version = d.get("version")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise SessionFileError(f"the session file's version {_short(version)} is not a format version")
    if version > VERSION:
        raise SessionFileError(f"the session file was written by a newer Hookscope (format "
                               f"version {version}; this one reads up to {VERSION}): update Hookscope")
    model = _get(d, "model", dict, "session")
    spec = _get(model, "spec", str, "model").strip()
    if not spec:
        raise SessionFileError("model.spec is empty")
    weights = _get(model, "weights", str, "model", None)
    labels = _get(model, "labels", str, "model", None)
    inp = _get(d, "input", dict, "session", {})
    text = _get(inp, "text", str, "input", "example")
    if _get(inp, "file", bool, "input", False):
        text = _abs(text, base)
    device = _get(d, "device", str, "session", "cpu")
    plan_d = _get(d, "plan", dict, "session", {})
    capture = _get(plan_d, "capture", list, "plan", [])
    if not all(isinstance(p, str) for p in capture):
        raise SessionFileError("plan.capture must be a list of layer paths (strings)")
    _get(plan_d, "interventions", dict, "plan", {})
    try:
        plan = Plan.from_dict(plan_d)
    except (TypeError, ValueError, ArithmeticError, HookscopeError) as exc:  # 1e400 as an int: OverflowError
        raise SessionFileError(f"plan: {exc}") from exc
    opts_d = _get(d, "options", dict, "session", {})
    known = {f.name for f in dataclasses.fields(Options)}
    bad = [k for k, v in opts_d.items() if k not in known or not isinstance(v, bool)]
    if bad:
        raise SessionFileError(f"options {', '.join(sorted(bad))}: unknown, or not true/false")
    view = _get(d, "view", dict, "session", {})
    if _depth(view) > MAX_VIEW_DEPTH:
        raise SessionFileError(f"view is nested more than {MAX_VIEW_DEPTH} levels deep; the "
                               "window writes two or three: remove the view, or save the "
                               "session again")
    _get(view, "selected", str, "view", None)  # a layer path: the window looks it up by it
    saes = saes_from_dict(d["saes"], lambda p: _abs(p, base), SessionFileError) \
        if d.get("saes") is not None else {}
    views = views_from_dict(d["views"], SessionFileError) if d.get("views") is not None else ()
    scan, scan_note = None, None
    if d.get("scan") is not None:  # a sidecar that is not read leaves a note, never an error
        try:
            scan = read_sidecar(d["scan"], base)
        except SidecarError as exc:
            scan_note = str(exc)
    return SessionSetup(spec=_map_spec(spec, lambda p: _abs(p, base)),
                        weights=_abs(weights, base) if weights else None,
                        input_text=text, device=device, plan=plan, options=Options(**opts_d),
                        view=view, labels=_abs(labels, base) if labels else None,
                        scan=scan, scan_note=scan_note, saes=saes, views=views)


def _depth(value: Any) -> int:
    return nesting_depth(value, MAX_VIEW_DEPTH)


def read_session_file(path: str | Path) -> SessionSetup:
    """Read and check a ``*.hookscope.json`` file (raises :class:`SessionFileError`)."""
    path = Path(path).expanduser()
    name = path.name
    try:  # a FIFO or /dev/zero under this name is refused, never waited on or read without end
        raw = read_regular(path, MAX_BYTES, "the session file", SessionFileError)
    except OSError as exc:
        raise SessionFileError(f"cannot read the session file {path}: {exc.strerror or exc}") from exc
    try:
        d = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise SessionFileError(f"{name} is not a Hookscope session file: not UTF-8 text") from exc
    except json.JSONDecodeError as exc:
        raise SessionFileError(f"{name} is not a Hookscope session file: broken JSON at line "
                               f"{exc.lineno}, column {exc.colno} ({exc.msg})") from exc
    except RecursionError as exc:
        raise SessionFileError(f"{name} is not a Hookscope session file: nested too deep") from exc
    except ValueError as exc:  # a number of more than 4,300 digits: Python refuses to read it
        raise SessionFileError(f"{name} is not a Hookscope session file: it holds a number "
                               "too long to read (more than 4,300 digits)") from exc
    try:
        return setup_from_dict(d, path.resolve().parent)
    except SessionFileError as exc:
        raise SessionFileError(f"{name}: {exc}") from exc
