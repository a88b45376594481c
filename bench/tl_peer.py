"""TransformerLens as a bench peer, on the API of the version installed.

TransformerLens 4 (what ``pip install transformer-lens`` gives today) removed
``HookedTransformer`` and ``transformer_lens.pretrained``; its ``TransformerBridge`` wraps a
Hugging Face model, booted from a saved folder (``TransformerBridge.boot_transformers(DIR)``),
with the same hook names, ``run_with_cache`` and ``patching`` functions. TransformerLens 3.x
builds a ``HookedTransformer`` and loads the converted weights. Either way the peer holds the
Hugging Face GPT-2's own weights, nothing folded.
"""

from __future__ import annotations

import importlib
import tempfile
from importlib.metadata import version
from typing import Any


def tl_version() -> str | None:
    """TransformerLens's version, or ``"not installed (...)"`` where it does not import."""
    try:
        mod = importlib.import_module("transformer_lens")
    except Exception as exc:  # ImportError, or a broken install
        return f"not installed ({type(exc).__name__})"
    return getattr(mod, "__version__", None) or version("transformer-lens")


def _major(v: str) -> int:
    try:
        return int(v.split(".")[0])
    except ValueError:
        return 0


def tl_gpt2(hf: Any) -> Any:
    """A TransformerLens model holding ``hf``'s weights (a ``GPT2LMHeadModel``), in eval
    mode: a ``TransformerBridge`` on TransformerLens 4, a ``HookedTransformer`` before."""
    v = tl_version() or "0"
    if _major(v) >= 4:
        from transformer_lens.model_bridge import TransformerBridge
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()  # saving and loading: no bars on the bench's stderr
        with tempfile.TemporaryDirectory(prefix="hookscope-tl-") as folder:
            hf.save_pretrained(folder)
            bridge = TransformerBridge.boot_transformers(folder, device="cpu")
        return bridge.eval()
    return _hooked_transformer(hf)


def tl_gpt2_config(layers: int, width: int = 768, vocab: int = 50257, seed: int = 0) -> Any:
    """A TransformerLens GPT-2 of this shape with seeded random weights (no download)."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(seed)
    cfg = GPT2Config(n_layer=layers, n_embd=width, n_head=width // 64, n_positions=1024,
                     vocab_size=vocab)
    return tl_gpt2(GPT2LMHeadModel(cfg).eval())


def _hooked_transformer(hf: Any) -> Any:
    """TransformerLens 3.x: a ``HookedTransformer`` with ``hf``'s converted weights."""
    from transformer_lens import HookedTransformer, HookedTransformerConfig
    from transformer_lens.pretrained.weight_conversions import convert_gpt2_weights

    c = hf.config
    cfg = HookedTransformerConfig(
        n_layers=c.n_layer, d_model=c.n_embd, n_ctx=c.n_positions, d_head=c.n_embd // c.n_head,
        n_heads=c.n_head, d_mlp=4 * c.n_embd, d_vocab=c.vocab_size, act_fn="gelu_new",
        normalization_type="LN", device="cpu", default_prepend_bos=False)
    tl = HookedTransformer(cfg)
    tl.load_and_process_state_dict(convert_gpt2_weights(hf, cfg), fold_ln=False,
                                   center_writing_weights=False, center_unembed=False,
                                   fold_value_biases=False, refactor_factored_attn_matrices=False)
    return tl.eval()
