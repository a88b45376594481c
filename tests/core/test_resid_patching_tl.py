"""The 12 x 16 ``resid_pre`` / ``resid_mid`` activation-patching grids of a sweep equal
TransformerLens's on the same weights.

Runs where ``transformer-lens`` is installed (TransformerLens 4: its ``TransformerBridge``
booted from the saved folder holds the Hugging Face model's own weights, nothing folded);
skipped elsewhere. The model is GPT-2-small-shaped (12 blocks) but narrow, with seeded random
weights; the prompts are 16 tokens each. Both sides run the corrupted prompt and write the
clean run's activation at one (block, position) a cell, as TransformerLens's patching does, and
read the same metric: the logit of one token minus another's at the last position.

``resid_mid`` has two meanings here. TransformerLens 4's bridge aliases
``blocks.N.hook_resid_mid`` to ``ln2.hook_in``, the second norm's input inside Hugging Face's
block: writing it changes what the MLP reads while the block's skip connection keeps the
corrupted value, so its ``get_act_patch_resid_mid`` grid is Hookscope's
``transformer.h.N.ln_2:input`` grid. Hookscope's ``resid_mid.N`` is the residual stream itself
(HookedTransformer's ``hook_resid_mid``, where ``resid_post = resid_mid + mlp_out`` holds under
an intervention): its grid equals TransformerLens's own patching loop writing, at
``hook_attn_out``, the attention output that makes ``resid_mid`` the clean run's.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from hookscope.core import load_model, parse_input
from hookscope.core.analyses import sweep

pytest.importorskip("transformers", reason="the hf extra (transformers) is not installed")
pytest.importorskip("transformer_lens", reason="TransformerLens is not installed")
import hf_models  # noqa: E402  (tests/core is on sys.path)

CLEAN = "the cat sat on the mat and the dog sat on the"
CORRUPTED = "the dog sat on the log and the cat sat on the"
A, B = " dog", " the"
LAYERS, POSITIONS = 12, 16
TOL = 1e-5


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """One intra-op thread while these ~800 small forwards run (restored after): on a busy
    host two threads made them ~20 times slower, past the suite's timeout."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    from transformer_lens.model_bridge import TransformerBridge

    folder = hf_models.gpt2(tmp_path_factory.mktemp("tl_patch") / "gpt2", layers=LAYERS, width=64)
    lm = load_model(f"hf:{folder}")
    bridge = TransformerBridge.boot_transformers(str(folder), device="cpu").eval()
    return lm, bridge


@pytest.fixture(scope="module")
def prompts(models):
    lm, bridge = models
    codec = lm.meaning.codec
    corrupted = parse_input(f"text:{CORRUPTED}", lm.example_input, codec)
    clean = parse_input(f"text:{CLEAN}", lm.example_input, codec)
    assert corrupted["input_ids"].shape == clean["input_ids"].shape == (1, POSITIONS)
    (a,), (b,) = codec.encode(A), codec.encode(B)

    def metric(logits):
        return logits[0, -1, a] - logits[0, -1, b]

    _, clean_cache = bridge.run_with_cache(clean["input_ids"])
    return corrupted, clean_cache, metric


def _hookscope_grid(lm, corrupted, layers: str) -> np.ndarray:
    """Hookscope's grid: the corrupted prompt run, the clean one's value patched in at each
    (layer, position)."""
    res = sweep(lm.module, corrupted, {"layer": layers, "pos": "all"},
                {"{layer}": f"patch:text:{CLEAN}@pos={{pos}}"}, f"logit-diff:'{A}','{B}'",
                meaning=lm.meaning)
    assert res.values.shape == (LAYERS, POSITIONS)
    return res.values


def test_resid_pre_grid_equals_transformer_lens(models, prompts):
    from transformer_lens import patching

    lm, bridge = models
    corrupted, clean_cache, metric = prompts
    tl = patching.get_act_patch_resid_pre(bridge, corrupted["input_ids"], clean_cache, metric)
    ours = _hookscope_grid(lm, corrupted, "resid_pre.*")
    np.testing.assert_allclose(ours, tl.double().numpy(), rtol=0, atol=TOL)
    assert np.ptp(ours) > 100 * TOL  # a grid whose cells differ, not a constant


def test_resid_mid_grid_equals_transformer_lens_on_the_residual_stream(models, prompts):
    """``resid_mid.*`` against TransformerLens's patching loop at ``hook_attn_out`` writing
    ``clean resid_mid - corrupted resid_pre`` (so ``resid_mid = resid_pre + attn_out`` is the
    clean one's); ``transformer.h.*.ln_2:input`` against ``get_act_patch_resid_mid``."""
    from transformer_lens import patching
    from transformer_lens.ActivationCache import ActivationCache

    lm, bridge = models
    corrupted, clean_cache, metric = prompts
    ids = corrupted["input_ids"]
    _, corrupted_cache = bridge.run_with_cache(ids)
    # A layer's patch comes after its resid_pre, so the corrupted run's resid_pre is the
    # patched run's there.
    attn_out = {f"blocks.{n}.hook_attn_out": clean_cache[f"blocks.{n}.hook_resid_mid"]
                - corrupted_cache[f"blocks.{n}.hook_resid_pre"] for n in range(LAYERS)}
    on_stream = patching.generic_activation_patch(
        bridge, ids, ActivationCache(attn_out, bridge), metric,
        patching.layer_pos_patch_setter, "attn_out", index_axis_names=("layer", "pos"))
    ours = _hookscope_grid(lm, corrupted, "resid_mid.*")
    np.testing.assert_allclose(ours, on_stream.double().numpy(), rtol=0, atol=TOL)

    tl_mid = patching.get_act_patch_resid_mid(bridge, ids, clean_cache, metric)
    norm_input = _hookscope_grid(lm, corrupted, "transformer.h.*.ln_2:input")
    np.testing.assert_allclose(norm_input, tl_mid.double().numpy(), rtol=0, atol=TOL)
    # The two places are told apart: a cell where writing the skip too moves the metric.
    assert np.abs(ours - norm_input).max() > 100 * TOL
    with torch.no_grad():  # the bridge's forward is the Hugging Face model's
        torch.testing.assert_close(bridge(ids), lm.module(**corrupted).logits, rtol=0, atol=TOL)
