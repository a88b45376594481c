"""TransformerLens as a bench peer, on the API of the version installed.

TransformerLens 4 (what ``pip install transformer-lens`` gives today) removed
``HookedTransformer`` and ``transformer_lens.pretrained``; its ``TransformerBridge`` wraps a
Hugging Face model, booted from a saved folder (``TransformerBridge.boot_transformers(DIR)``),
with the same hook names, ``run_with_cache`` and ``patching`` functions. TransformerLens 3.x
builds a ``HookedTransformer`` and loads the converted weights. Either way the peer holds the
Hugging Face GPT-2's own weights, nothing folded.

:func:`resid_pre_attribution` is TransformerLens's attribution patching of the residual
stream as its users write it (the "Attribution Patching" demo's recipe), and
:func:`attribution_row` the sweep-estimate case's row timing it.
"""

from __future__ import annotations

import importlib
import tempfile
from importlib.metadata import version
from typing import Any, Callable

from .timing import ratio_row, rounds_against_plain

#: what a skipped row tells a reader who wants it
INSTALL = "pip install 'transformer-lens>=4' (the bench extra) to compare"


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


def resid_pre_attribution(tl: Any, clean: Any, corrupted: Any,
                          metric: Callable[[Any], Any]) -> tuple[Any, float]:
    """Attribution patching of ``blocks.N.hook_resid_pre`` the way TransformerLens's demo
    writes it: the clean prompt's activations cached, the corrupted run with a forward hook
    keeping each activation and a backward hook (``add_hook(name, fn, "bwd")``) keeping the
    metric's gradient there, ``metric(logits).backward()``, then
    ``(clean_act - corrupted_act) * grad`` summed over d_model. ``run_with_cache(...,
    incl_bwd=True)`` cannot serve: it calls ``backward()`` on the model's output, which must
    be the scalar loss, not a metric of the logits. As in the demo the parameters keep
    ``requires_grad``, so the backward also computes their gradients (dropped after).
    Returns the ``[layers, positions]`` grid and the metric on the corrupted run."""
    import torch

    names = [f"blocks.{i}.hook_resid_pre" for i in range(tl.cfg.n_layers)]
    tl.reset_hooks()
    with torch.no_grad():
        _, clean_cache = tl.run_with_cache(clean, names_filter=names)
    acts: dict[str, Any] = {}
    grads: dict[str, Any] = {}

    def keep_act(act: Any, hook: Any) -> None:
        acts[hook.name] = act.detach()

    def keep_grad(grad: Any, hook: Any) -> None:
        grads[hook.name] = grad.detach()

    for name in names:
        tl.add_hook(name, keep_act, "fwd")
        tl.add_hook(name, keep_grad, "bwd")
    try:
        value = metric(tl(corrupted))
        value.backward()
    finally:
        tl.reset_hooks()
        tl.zero_grad(set_to_none=True)
    # the hooks see the point's own name (TransformerLens 4: blocks.N.hook_in)
    points = [tl.hook_dict[n].name for n in names]
    grid = torch.stack([((clean_cache[n] - acts[p]) * grads[p]).sum(-1)[0]
                        for n, p in zip(names, points)])
    return grid, float(value.detach())


def attribution_row(grid: Any, estimates: Any, plain: Callable[[], Any], repeats: int,
                    now: Callable[[], float], peers: bool = True) -> dict:
    """The sweep-estimate case's ``transformer_lens X attribution`` row on ``grid``'s
    weights and prompts (a :class:`bench.sweep_bench.ResidPreGrid`): the median over rounds
    of :func:`resid_pre_attribution`'s time against ``plain`` (the Hugging Face model's plain
    forward, timed just before it), and the largest difference from Hookscope's
    ``estimates`` (the metric on the corrupted run plus the attribution: the same first-order
    quantity). Without TransformerLens (or ``peers`` off) a row with a note only."""
    import numpy as np
    import torch

    ver = tl_version() if peers else "not run (--no-peers)"
    if ver is None or ver.startswith("not "):
        return {"name": "transformer_lens attribution",
                "note": f"skipped: TransformerLens {ver}; {INSTALL}"}
    tl = tl_gpt2(grid.model)
    with torch.inference_mode():
        logits_diff = float((grid.model(grid.clean).logits - tl(grid.clean)).abs().max())

    def metric(logits: Any) -> Any:
        return logits[0, -1, grid.a_tok] - logits[0, -1, grid.b_tok]

    def recipe() -> tuple[Any, float]:
        return resid_pre_attribution(tl, grid.clean, grid.corrupted, metric)

    attr, corrupted_metric = recipe()  # the warm-up, and the grid checked
    vs = float(np.abs(attr.double().numpy() + corrupted_metric - estimates).max())
    seconds, ratios, _ = rounds_against_plain([plain], {"tl": recipe}, repeats, now, 9)
    row = ratio_row(f"transformer_lens {ver} attribution", seconds["tl"], ratios["tl"], None,
                    "the demo's recipe: clean run_with_cache + corrupted forward with fwd and "
                    "bwd hooks at hook_resid_pre + backward (parameter gradients included); "
                    f"logits equal the HF model's to {logits_diff:.1g}; max |TL attribution + "
                    f"corrupted metric - hookscope estimate| {vs:.2g}")
    row["max_abs_vs_estimate"] = vs
    return row
