"""hf: speech models (Whisper, wav2vec2) get an example input; tiny configs saved here, nothing
downloaded. Captures and clamps equal hand-written hooks."""

from __future__ import annotations

import pytest
import torch

from hookscope.core import Plan, compare, load_model
from hookscope.core.base.meaning import TOKENS
from hookscope.core.model.source_hf_audio import sine_wave

tf = pytest.importorskip("transformers", reason="the hf extra (transformers) is not installed")

WHISPER_LAYER = "model.encoder.layers.0"
W2V_LAYER = "wav2vec2.encoder.layers.0"


def _whisper(folder, extractor: bool):
    torch.manual_seed(0)
    cfg = tf.WhisperConfig(vocab_size=64, num_mel_bins=8, encoder_layers=1, decoder_layers=1,
                           d_model=16, encoder_attention_heads=2, decoder_attention_heads=2,
                           encoder_ffn_dim=32, decoder_ffn_dim=32, max_source_positions=16,
                           max_target_positions=16, decoder_start_token_id=1, pad_token_id=0,
                           bos_token_id=1, eos_token_id=2)
    tf.WhisperForConditionalGeneration(cfg).save_pretrained(folder)
    if extractor:
        tf.WhisperFeatureExtractor(feature_size=8).save_pretrained(folder)
    return folder


def _wav2vec2(folder, extractor: bool):
    torch.manual_seed(0)
    cfg = tf.Wav2Vec2Config(vocab_size=12, hidden_size=16, num_hidden_layers=1,
                            num_attention_heads=2, intermediate_size=32, conv_dim=(16, 16, 16),
                            conv_stride=(5, 4, 4), conv_kernel=(10, 8, 4),
                            num_conv_pos_embeddings=8, num_conv_pos_embedding_groups=2)
    tf.Wav2Vec2ForCTC(cfg).save_pretrained(folder)
    if extractor:
        tf.Wav2Vec2FeatureExtractor(feature_size=1, sampling_rate=16000, padding_value=0.0,
                                    do_normalize=True).save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    root = tmp_path_factory.mktemp("hf_audio")
    return {"whisper": _whisper(root / "whisper", True),
            "whisper_bare": _whisper(root / "whisper_bare", False),
            "w2v": _wav2vec2(root / "w2v", True),
            "w2v_bare": _wav2vec2(root / "w2v_bare", False)}


def _hand_capture(model, layer, kwargs, clamp=None):
    """A plain forward hook: the layer's first output (cloned), and the logits, optionally
    with that output clamped."""
    seen = []

    def hook(_m, _i, out):
        first = out[0] if isinstance(out, tuple) else out
        seen.append(first.detach().clone())
        if clamp is None:
            return None
        c = first.clamp(*clamp)
        return (c,) + tuple(out[1:]) if isinstance(out, tuple) else c

    h = model.get_submodule(layer).register_forward_hook(hook)
    try:
        with torch.no_grad():
            logits = model(**kwargs).logits
    finally:
        h.remove()
    return seen[0], logits


def _capture_and_clamp_like_hooks(lm, layer):
    ex = lm.example_input
    r = compare(lm.module, ex, Plan(capture=[layer]))
    seen, _ = _hand_capture(lm.module, layer, ex)
    assert r.calls[layer] == 1 and torch.equal(r.captures[layer][0].tensor, seen)
    c = compare(lm.module, ex, Plan(clamp={layer: (-0.05, 0.05)}))
    _, clamped = _hand_capture(lm.module, layer, ex, (-0.05, 0.05))
    assert c.outputs_differ and torch.equal(c.output_with["logits"], clamped)
    assert not lm.module.get_submodule(layer)._forward_hooks


def test_whisper_gets_log_mel_features_of_a_sine_and_a_decoder_start(saved):
    lm = load_model(f"hf:{saved['whisper']}")
    ex = lm.example_input
    assert set(ex) == {"input_features", "decoder_input_ids"}
    cfg = lm.module.config
    fe = tf.WhisperFeatureExtractor.from_pretrained(saved["whisper"])
    want = fe(sine_wave(fe.sampling_rate), sampling_rate=fe.sampling_rate,
              return_tensors="pt")["input_features"]
    frames = 2 * cfg.max_source_positions
    assert ex["input_features"].shape == (1, cfg.num_mel_bins, frames)
    assert torch.equal(ex["input_features"], want[..., :frames])
    assert ex["decoder_input_ids"].tolist() == [[cfg.decoder_start_token_id]]
    assert lm.meaning.kind == TOKENS
    _capture_and_clamp_like_hooks(lm, WHISPER_LAYER)


def test_whisper_without_a_feature_extractor_gets_features_of_the_config_shape(saved):
    lm = load_model(f"hf:{saved['whisper_bare']}")
    cfg = lm.module.config
    x = lm.example_input["input_features"]
    assert x.shape == (1, cfg.num_mel_bins, 2 * cfg.max_source_positions)
    assert float(x.min()) >= -1.0 and float(x.max()) <= 1.0 and float(x.std()) > 0.1
    _capture_and_clamp_like_hooks(lm, WHISPER_LAYER)


def test_wav2vec2_gets_the_normalised_waveform_of_a_second_of_sine(saved):
    lm = load_model(f"hf:{saved['w2v']}")
    ex = lm.example_input
    assert set(ex) == {"input_values"}
    fe = tf.Wav2Vec2FeatureExtractor.from_pretrained(saved["w2v"])
    want = fe(sine_wave(16000), sampling_rate=16000, return_tensors="pt")["input_values"]
    assert torch.equal(ex["input_values"], want)
    assert lm.meaning.kind == TOKENS and not lm.meaning.causal  # CTC: a token per frame
    _capture_and_clamp_like_hooks(lm, W2V_LAYER)


def test_wav2vec2_without_a_feature_extractor_gets_a_second_at_16_khz(saved):
    lm = load_model(f"hf:{saved['w2v_bare']}")
    x = lm.example_input["input_values"]
    assert x.shape == (1, 16000)
    wave = torch.from_numpy(sine_wave(16000))
    assert torch.allclose(x[0], (wave - wave.mean()) / wave.std(), atol=1e-5)
    _capture_and_clamp_like_hooks(lm, W2V_LAYER)
