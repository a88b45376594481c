"""``sae-*`` edits in the exported script: the SAEs' weights beside it, their settings in it.

The script's edits are :mod:`hookscope.core.plan.sae_leaf`'s plain-torch functions; each finds
its layer's SAE in ``SAE_OF`` (layer module -> SAE dict), which :func:`sae_section` fills from
``NAME.sae.safetensors`` beside the script (:func:`sae_weights_file`), read with
``safetensors`` (tensors only, never a pickle). The script then imports torch and
safetensors alone.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from safetensors.torch import save_file

from ..base.atomic_write import atomic_write
from ..base.errors import HookscopeError
from ..model.sae import SparseAutoencoder
from ..plan.plan import Plan
from ..plan.sae_interventions import SaeEdit

SAE_SUFFIX = ".sae.safetensors"
_NAMES = ("W_enc", "b_enc", "W_dec", "b_dec", "threshold")


def sae_weights_file(script: str | Path) -> Path:
    """Where the SAEs of the script ``script`` are written: ``repro.py`` -> ``repro.sae.safetensors``."""
    return Path(script).expanduser().with_suffix(SAE_SUFFIX)


def sae_layers(plan: Plan) -> list[str]:
    """The layers the plan edits through an SAE."""
    return [p for p, iv in plan.all_interventions().items() if isinstance(iv, SaeEdit)]


def saes_for(plan: Plan, saes: dict[str, SparseAutoencoder] | None) -> dict[str, SparseAutoencoder]:
    """The SAE of each layer the plan edits through one (refused where none is attached)."""
    out = {}
    for layer in sae_layers(plan):
        sae = (saes or {}).get(layer)
        if sae is None:
            raise HookscopeError(f"the script export needs the SAE of {layer!r} for its sae-* "
                                 "edit: attach it (--sae LAYER=DIR, File → Attach SAE)")
        out[layer] = sae
    return out


def _settings(sae: SparseAutoencoder) -> dict[str, Any]:
    return {"architecture": sae.architecture, "k": sae.k, "d_in": sae.d_in,
            "apply_b_dec_to_input": sae.apply_b_dec_to_input,
            "rescale_acts_by_decoder_norm": sae.rescale_acts_by_decoder_norm,
            "normalize_activations": sae.normalize_activations}


def sae_section(saes: dict[str, SparseAutoencoder], script: str | Path) -> str:
    """The script's lines that read the SAEs' weights from beside it and fill ``SAE_OF``."""
    settings = {layer: _settings(sae) for layer, sae in saes.items()}
    return (
        "# The SAEs of the sae-* edits: weights in a safetensors file beside this script\n"
        "from pathlib import Path\n"
        "from safetensors.torch import load_file\n\n"
        f"SAE_WEIGHTS = load_file(str(Path(__file__).with_name({sae_weights_file(script).name!r})))\n"
        f"SAE_SETTINGS = {settings!r}\n"
        "SAE_OF = {layers[name]: {**s, \"weights\": {k.split(\"/\", 1)[1]: v for k, v in SAE_WEIGHTS.items()\n"
        "                                         if k.split(\"/\", 1)[0] == name}}\n"
        "          for name, s in SAE_SETTINGS.items()}\n\n")


def sae_tensors(saes: dict[str, SparseAutoencoder]) -> dict[str, torch.Tensor]:
    """``{"layer/W_enc": tensor, ...}``: every SAE's weights, float32 as Hookscope computes."""
    out = {}
    for layer, sae in saes.items():
        if "/" in layer:
            raise HookscopeError(f"the script export cannot name the SAE of {layer!r} (a '/')")
        for name in _NAMES:
            t = getattr(sae, name)
            if t is not None:
                out[f"{layer}/{name}"] = t.detach().float().cpu().contiguous()
    return out


def write_sae_weights(script: str | Path, plan: Plan,
                      saes: dict[str, SparseAutoencoder] | None) -> Path | None:
    """Write the SAEs the plan's ``sae-*`` edits use beside ``script`` (``None``: it has none)."""
    used = saes_for(plan, saes)
    if not used:
        return None
    tensors = sae_tensors(used)
    return atomic_write(sae_weights_file(script), lambda tmp: save_file(tensors, str(tmp)))
