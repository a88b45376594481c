"""Attention patterns are refused, in one line that says why, where they cannot be
recovered: a module that is not attention, attention of an unknown family (T5's relative
position bias), cross-attention, rotary attention called without its positions, a mask
that is not a tensor, a module the forward never calls, an intervention inside the
attention on what its pattern is computed from. Each fixture is built here."""

import importlib.util
from pathlib import Path

import pytest

from hookscope.app.cli import main
from hookscope.core import PlanError
from hookscope.core.analyses.attention_families import attention_reader

pytest.importorskip("transformers", reason="the hf extra (transformers) is not installed")


def hf_models():
    """tests/core/hf_models.py (small models built from configs, nothing downloaded)."""
    spec = importlib.util.spec_from_file_location(
        "hf_models_for_attention", Path(__file__).parents[1] / "core" / "hf_models.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def refused(capsys, *argv):
    code = main(["run", *argv])
    _, err = capsys.readouterr()
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err, err
    return err


@pytest.mark.parametrize("spec, layer, words", [
    ("attention_hostile_models:no_positions", "attn", "without position_embeddings (cos, sin)"),
    ("attention_hostile_models:opaque_mask", "attn", "mask of OpaqueMask is a object (flex "
                                                      "attention?), which Hookscope cannot read"),
    ("attention_hostile_models:never_runs", "attn", "attn did not run in this forward"),
    ("attention_hostile_models:never_runs", "pre", "'pre' (Linear) is not an attention module"),
])
def test_hostile_attention_modules_are_refused(capsys, spec, layer, words):
    assert words in refused(capsys, spec, "--attention", layer)


def test_t5_relative_attention_is_refused(tmp_path):
    from transformers import T5ForConditionalGeneration

    model = T5ForConditionalGeneration.from_pretrained(hf_models().t5(tmp_path / "t5"))
    with pytest.raises(PlanError, match=r"\(T5Attention\) is not an attention module whose "
                                        "probabilities Hookscope can recover"):
        attention_reader(model, "encoder.block.0.layer.0.SelfAttention")


def test_cross_attention_is_refused():
    from transformers import GPT2Config, GPT2LMHeadModel

    cfg = GPT2Config(n_layer=1, n_embd=16, n_head=2, vocab_size=50, n_positions=16,
                     add_cross_attention=True)
    model = GPT2LMHeadModel(cfg)
    with pytest.raises(PlanError, match="is cross-attention: only self-attention"):
        attention_reader(model, "transformer.h.0.crossattention")


def test_an_intervention_inside_the_attention_is_refused(capsys, tmp_path):
    folder = hf_models().llama(tmp_path / "llama")
    capsys.readouterr()  # what building the model printed
    err = refused(capsys, f"hf:{folder}", "--input", "text:the cat", "--attention",
                  "model.layers.1.self_attn", "--intervene", "model.layers.1.self_attn.k_proj=zero")
    assert "the intervention on model.layers.1.self_attn.k_proj acts inside the attention" in err
