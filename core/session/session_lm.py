"""The language-model part of a session file: the SAEs attached to layers and the settings
of the open LM views (logit lens, generation, attention patterns, SAE features)::

    "saes": {"blocks.0": "demo", "blocks.1": "saes/blocks1"},
    "views": {"lens": {"head": null, "target": " the", "top_k": 5},
              "generation": {"n": 20, "temperature": 0.0, "seed": 0, "top_k": 5,
                             "cache": true, "check_cache": false},
              "attention": {"layers": ["blocks.0.attn"], "row": 0},
              "sae": {"layers": ["blocks.0"], "top_k": 5}}

An SAE folder named by a session file is data: it is read when the file is read, by
:func:`~hookscope.core.model.sae.load_sae` with every refusal of ``--sae`` (nothing is
unpickled, declared sizes are checked against the memory budget before anything is
allocated, FIFOs and devices are refused without blocking); a folder that cannot be read
makes the whole file unreadable (:class:`SessionFileError` naming the layer), so a session
never opens with its ``sae-*`` edits silently missing their SAE. Paths are written relative
to the session file's folder when they lie under it; ``demo`` stays ``demo``. Each view's
settings are checked field by field (names, types, ranges) and built into the same
request the CLI and the window make.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, Callable

from ..analyses import AttentionRequest, GenerateRequest, LensRequest, SaeRequest
from ..base.errors import HookscopeError
from ..base.read_files import ReadFiles
from ..model.loaded_model import LoadedModel
from ..model.sae import DEMO_SAE, SparseAutoencoder, load_sae
from ..model.tree import TreeNode
from .session_views import DerivedViews

#: the LM views a session file keeps, by the name a run's ``extras`` gives them
VIEW_KINDS: dict[str, type] = {"lens": LensRequest, "generation": GenerateRequest,
                               "attention": AttentionRequest, "sae": SaeRequest}
MAX_TOP_K = 1000
MAX_SAES = 256


def _text(v: Any) -> bool:
    return isinstance(v, str)


def _whole(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


#: each field a view may hold: what it must be, said in the error when it is not
_FIELDS: dict[str, tuple[Callable[[Any], bool], str]] = {
    "head": (lambda v: v is None or _text(v), "a layer path or null"),
    "target": (lambda v: v is None or _text(v) or _whole(v), "a token (text), a token id or null"),
    "top_k": (lambda v: _whole(v) and 1 <= v <= MAX_TOP_K, f"a whole number in 1..{MAX_TOP_K}"),
    "n": (_whole, "a whole number"),
    "temperature": (lambda v: _whole(v) or isinstance(v, float), "a number"),
    "seed": (_whole, "a whole number"),
    "cache": (lambda v: isinstance(v, bool), "true or false"),
    "check_cache": (lambda v: isinstance(v, bool), "true or false"),
    "layers": (lambda v: isinstance(v, list) and 0 < len(v) <= MAX_SAES and all(map(_text, v)),
               "a list of layer paths"),
    "row": (lambda v: _whole(v) and 0 <= v < 1 << 31, "a batch row (0 or more)"),
}


class SaeEntry:
    """An SAE a session file names: the text written (``demo`` or a path, resolved) and the
    SAE read from it."""

    def __init__(self, text: str, sae: SparseAutoencoder) -> None:
        self.text, self.sae = text, sae


# -- writing ----------------------------------------------------------------------
def lm_to_dict(saes: dict[str, str], derived: dict[str, Any],
               rel: Callable[[str], str]) -> dict[str, Any]:
    """``saes`` and ``views`` entries for a session file (empty ones left out); ``rel``
    writes a path relative to the session file's folder."""
    out: dict[str, Any] = {}
    if saes:
        out["saes"] = {layer: text if text == DEMO_SAE else rel(text) for layer, text in saes.items()}
    views = {}
    for name, view in derived.items():
        kind = VIEW_KINDS.get(name)
        if kind is not None and isinstance(view, kind):
            views[name] = {f.name: list(v) if isinstance(v := getattr(view, f.name), tuple) else v
                           for f in dataclasses.fields(kind)}
    if views:
        out["views"] = views
    return out


# -- reading ----------------------------------------------------------------------
def saes_from_dict(d: Any, resolve: Callable[[str], str], error: type[HookscopeError]
                   ) -> dict[str, SaeEntry]:
    """The SAEs of a session file's ``saes`` object, each read with ``--sae``'s refusals
    (``error`` raised, naming the layer, chained from the SAE's own error)."""
    if not isinstance(d, dict) or len(d) > MAX_SAES:
        raise error(f"saes must be an object of at most {MAX_SAES} layer paths, each naming "
                    "an SAE folder")
    out: dict[str, SaeEntry] = {}
    for layer, text in d.items():
        if not isinstance(text, str) or not text.strip():
            raise error(f"saes.{layer} must name an SAE folder (text), got {_short(text)}")
        folder = text if text == DEMO_SAE else resolve(text)
        try:
            out[layer] = SaeEntry(folder, load_sae(folder))
        except HookscopeError as exc:
            raise error(f"saes.{layer}: {exc}") from exc
    return out


def views_from_dict(d: Any, error: type[HookscopeError]) -> tuple:
    """The LM view requests of a session file's ``views`` object (``error`` on anything
    unknown, of the wrong type or out of range)."""
    if not isinstance(d, dict):
        raise error("views must be an object")
    out = []
    for name, fields in d.items():
        kind = VIEW_KINDS.get(name)
        if kind is None:
            raise error(f"views.{_short(name)} is not a view Hookscope keeps "
                        f"({', '.join(VIEW_KINDS)})")
        if not isinstance(fields, dict):
            raise error(f"views.{name} must be an object of its settings")
        known = {f.name for f in dataclasses.fields(kind)}
        for key, value in fields.items():
            if key not in known:
                raise error(f"views.{name}.{_short(key)} is not a setting of the {name} view")
            ok, what = _FIELDS[key]
            if not ok(value):
                raise error(f"views.{name}.{key} must be {what}, got {_short(value)}")
        args = {k: tuple(v) if isinstance(v, list) else v for k, v in fields.items()}
        try:
            out.append(kind(**args))
        except (TypeError, ValueError, ArithmeticError, HookscopeError) as exc:
            raise error(f"views.{name}: {exc}") from exc
    return tuple(out)


def _short(v: Any) -> str:
    r = repr(v)
    return r if len(r) <= 60 else r[:57] + "..."


def attach_saved(derived: DerivedViews, model: LoadedModel, tree: TreeNode | None,
                 read_files: ReadFiles, entries: dict[str, SaeEntry], views: tuple,
                 warnings: list[str]) -> None:
    """Once a session file's model has arrived: attach its SAEs to ``model`` through the
    session's ``derived`` views (a width the model refuses is a warning, the rest still
    opens), record their folders as read, and set its LM views."""
    for layer, entry in entries.items():
        try:
            derived.attach_sae(model, tree, layer, entry.text, entry.sae)
            read_files.add("the SAE folder", Path(entry.sae.folder))
        except HookscopeError as exc:
            warnings.append(f"the SAE of {layer} was not attached: {exc}")
    for view in views:
        derived.set(view.name, view)
