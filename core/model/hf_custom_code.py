"""A Hugging Face folder that needs its own code is refused, naming that code.

A model folder (or a cached model id) can ship Python files of its own and
name them in an ``auto_map`` in ``config.json``, ``tokenizer_config.json`` or a
processor's config; ``transformers`` runs them only with
``trust_remote_code=True``, and, when that is left unset, may ask on stdin.
Hookscope passes ``trust_remote_code=False`` to every loader and, before any of
them is called, reads those JSON files itself (regular files, bounded): a
folder with an ``auto_map`` is refused with the ``.py`` files it names, so the
person learns which code it is, and nothing asks, reads stdin or runs.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..base.errors import SpecError
from ..base.regular_file import read_regular
from ..base.user_text import shown

CONFIG_FILES = ("config.json", "tokenizer_config.json", "preprocessor_config.json",
                "processor_config.json", "feature_extractor_config.json",
                "image_processor_config.json")
MAX_CONFIG_BYTES = 16 << 20


def model_folder(name: str, local_dir: str | None) -> Path | None:
    """The folder holding ``name``'s files: ``local_dir`` when the spec names one, else the
    local cache's snapshot of the model id (``None`` when it is not cached)."""
    if local_dir is not None:
        return Path(local_dir)
    try:
        from huggingface_hub import try_to_load_from_cache  # lazy: optional (with transformers)

        found = try_to_load_from_cache(name, "config.json")
    except Exception:  # not a repo id at all ("a/b/c"), or no hub package: nothing to read
        return None
    return Path(found).parent if isinstance(found, str) else None


def refuse_custom_code(name: str, folder: Path | None) -> None:
    """Raise :class:`SpecError` naming the custom code when ``folder``'s configs have an
    ``auto_map``; reads JSON only, imports and runs nothing."""
    if folder is None:
        return
    found: dict[str, list[str]] = {}
    for fname in CONFIG_FILES:
        data = _read_json(folder / fname)
        if isinstance(data, dict) and data.get("auto_map"):
            found[fname] = _code_files(data["auto_map"])
    if not found:
        return
    files = sorted({f for fs in found.values() for f in fs})
    where = " and ".join(found)
    raise SpecError(f"hf:{shown(name)[1:-1]} needs its own Python code "
                    f"({', '.join(shown(f) for f in files) or 'files it does not name'}), named by "
                    f"the auto_map in its {where}. Hookscope never runs a model folder's code "
                    "(trust_remote_code=False), so nothing was run: read that code and load it "
                    "with a factory (file.py:f), or use a model class transformers has built in")


def _read_json(path: Path) -> Any:
    if not path.exists():
        return None
    try:
        return json.loads(read_regular(path, MAX_CONFIG_BYTES, "model config", SpecError).decode("utf-8"))
    except (ValueError, RecursionError):  # broken JSON: transformers says so later
        return None


def _code_files(auto_map: Any) -> list[str]:
    """``modeling_evil.py`` for ``"modeling_evil.EvilModel"`` (and ``"org/repo--x.Y"``);
    values may be strings or lists of them (a tokenizer's slow and fast classes)."""
    refs: list[str] = []
    values = auto_map.values() if isinstance(auto_map, dict) else (
        auto_map if isinstance(auto_map, list) else [auto_map])
    for v in values:
        for ref in (v if isinstance(v, (list, tuple)) else [v]):
            if isinstance(ref, str) and "." in ref:
                module = ref.split("--")[-1].rsplit(".", 1)[0]
                refs.append(module.replace(".", "/") + ".py")
    return sorted(set(refs))
