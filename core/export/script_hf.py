"""The model part of the exported script for an ``hf:FOLDER`` model: transformers rebuilds it.

The script loads the model the way the ``hf:`` adapter
(:mod:`hookscope.core.model.source_hf`) does, from the same local folder and
with nothing downloaded: ``AutoConfig.from_pretrained``, the class
``config.json``'s ``architectures`` names (``getattr(transformers, name)``,
else ``AutoModel``), ``from_pretrained(folder, local_files_only=True,
trust_remote_code=False)``, no key/value cache in the outputs, eval, CPU. So
the script needs transformers besides torch for this one part; the input
(token ids of a ``text:`` prompt, already tokenised into the payload), the
interventions, selectors and vectors stay plain torch.

A folder whose configs name code of their own (an ``auto_map``) is refused,
as the loader refuses it (:mod:`hookscope.core.model.hf_custom_code`); a model
id read from the local cache is refused too: the script names a folder.
The folder path and the class name enter the script through ``repr()`` only.
"""

from __future__ import annotations

from typing import Any

from ..base.errors import HookscopeError
from ..base.user_text import shown, user_path
from ..model.hf_custom_code import refuse_custom_code
from .script_template import comment_text

_HF_MODEL = '''
def load_hf(folder, architecture):
    """The saved model in folder, as the class it was saved as; nothing downloaded, and
    none of the folder's own code run (trust_remote_code=False)."""
    import transformers

    config = transformers.AutoConfig.from_pretrained(folder, local_files_only=True,
                                                     trust_remote_code=False)
    cls = getattr(transformers, architecture) if architecture else transformers.AutoModel
    made = cls.from_pretrained(folder, config=config, local_files_only=True,
                               trust_remote_code=False)
    if hasattr(made.config, "use_cache"):
        made.config.use_cache = False  # no key/value cache in the outputs, as in Hookscope
    return made


'''


def hf_section(spec: str, loaded: Any) -> str:
    """Source that defines ``model`` from ``spec``'s folder with transformers.

    ``loaded``: the model as the ``hf:`` adapter loaded it (its class is the one written)."""
    name = spec.strip().removeprefix("hf:").strip()
    folder = user_path(name) if name else None
    if folder is None or not folder.is_dir():
        raise HookscopeError(f"the script export needs hf: models as a folder: save "
                             f"{shown(name)} with save_pretrained and open hf:FOLDER, then export")
    folder = folder.resolve()
    refuse_custom_code(name, folder)  # the same refusal as the loader's, before anything is written
    arch = type(loaded.module).__name__ if loaded is not None else ""
    if not _is_transformers_class(arch, loaded):
        arch = ""  # AutoModel, as the adapter does without architectures
    return (_HF_MODEL
            + f"# {comment_text(spec)}: rebuilt by transformers (needed here besides torch) "
            "from its folder.\n"
            + f"model = load_hf({str(folder)!r}, {arch!r})\n")


def _is_transformers_class(arch: str, loaded: Any) -> bool:
    """Whether ``arch`` is the transformers class the model was loaded as (looked up by name)."""
    try:
        import transformers  # lazy: optional (the hf extra)
    except ImportError:
        return False
    return bool(arch) and arch.isidentifier() and loaded is not None \
        and getattr(transformers, arch, None) is type(loaded.module)

