"""The ``sae-*`` edits in plain torch, as the exported script defines them.

:mod:`.sae_interventions` computes with :class:`~hookscope.core.model.sae.SparseAutoencoder`;
the exported script has no Hookscope, so these functions repeat its arithmetic (SAELens's
encode, ``decode_change``, every ``cfg.json`` setting Hookscope reads) over an SAE held as a
plain dict: ``{"weights": {name: tensor}, "architecture", "k", "apply_b_dec_to_input",
"rescale_acts_by_decoder_norm", "normalize_activations", "d_in"}``. The script fills
``SAE_OF`` (layer module -> that dict) from the safetensors file written beside it; the
leaf functions find their layer's SAE there by the module they are called for. Their
source is copied into the script (``leaf_helpers``/``leaf_function``): torch only here.
"""

from __future__ import annotations

from typing import Any

import torch

#: layer module -> its SAE as a dict; the exported script fills it (empty here)
SAE_OF: dict[Any, dict[str, Any]] = {}


def sae_norm_in(sae, x):
    """x as the SAE reads it, and the scale and shift that give it back (SAELens's run-time
    activation norms: constant_norm_rescale, layer_norm; none)."""
    one = torch.ones((), dtype=x.dtype, device=x.device)
    if sae["normalize_activations"] == "constant_norm_rescale":
        coeff = sae["d_in"] ** 0.5 / x.norm(dim=-1, keepdim=True)
        return x * coeff, 1 / coeff, 0 * one
    if sae["normalize_activations"] == "layer_norm":
        mu = x.mean(dim=-1, keepdim=True)
        std = (x - mu).std(dim=-1, keepdim=True)
        return (x - mu) / (std + 1e-5), std, mu
    return x, one, 0 * one


def sae_weights_on(sae, t):
    return {n: w.to(device=t.device, dtype=torch.float32) for n, w in sae["weights"].items()}


def sae_encode(sae, x):
    """Feature activations of x (float32): standard, jumprelu or topk."""
    w = sae_weights_on(sae, x)
    z = sae_norm_in(sae, x.float())[0]
    if sae["apply_b_dec_to_input"]:
        z = z - w["b_dec"]
    pre = z @ w["W_enc"] + w["b_enc"]
    if sae["architecture"] == "jumprelu":
        return torch.relu(pre) * (pre > w["threshold"])
    if sae["rescale_acts_by_decoder_norm"]:
        pre = pre * w["W_dec"].norm(dim=-1)
    acts = torch.relu(pre)
    k = sae["k"]
    if sae["architecture"] == "topk" and k is not None and k < acts.shape[-1]:
        top = acts.topk(k, dim=-1)
        acts = torch.zeros_like(acts).scatter(-1, top.indices, top.values)
    return acts


def sae_edited(t, module, edit):
    """t + decode(edit(f)) - decode(f), f the features of t: the edited reconstruction with
    the SAE's reconstruction error kept (an edit that changes nothing leaves t as it is)."""
    sae = SAE_OF[module]
    f = sae_encode(sae, t)
    w = sae_weights_on(sae, t)
    change = edit(f.clone()) - f
    if sae["rescale_acts_by_decoder_norm"]:
        change = change * (1 / w["W_dec"].norm(dim=-1))
    scale = sae_norm_in(sae, t.float())[1]
    return (t.float() + (change @ w["W_dec"]) * scale).to(t.dtype)


def sae_ablate_leaf(t, module, source, features=()):
    """sae-ablate: zero the features."""
    if not features:
        return t

    def edit(f):
        f[..., list(features)] = 0.0
        return f
    return sae_edited(t, module, edit)


def sae_clamp_leaf(t, module, source, features=(), value=0.0):
    """sae-clamp: set the features to value at every position."""
    if not features:
        return t

    def edit(f):
        f[..., list(features)] = value
        return f
    return sae_edited(t, module, edit)


def sae_scale_leaf(t, module, source, features=(), factor=1.0):
    """sae-scale: multiply the features by factor."""
    if not features:
        return t

    def edit(f):
        f[..., list(features)] *= factor
        return f
    return sae_edited(t, module, edit)


SAE_HELPERS = (sae_norm_in, sae_weights_on, sae_encode, sae_edited)
