"""Sizes a person (or a file they were sent) gives: every one is parsed exactly and every
allocation made from one goes through the input budget, refused in one line before anything
is allocated.

Size options: a 400-digit number overflowed ``float`` (OverflowError traceback), and
``int()`` read the Arabic-Indic digit '٣' as 3, quietly setting a 3-byte budget. Budgets:
``random:`` on a model whose example input is a dict, and the example inputs an ``hf:``
folder's configs ask for (an image of ``image_size``, a spectrogram of ``num_mel_bins``,
a second of sound at the extractor's ``sampling_rate``), were made without asking.
The ``hf:`` folders are built here from small configs (nothing downloaded).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hookscope.app.cli import main

HUGE = "9" * 400
FAULTY = "faulty_models:dict_example"


def _one_line(capsys) -> str:
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("hookscope: error: "), err
    assert "Traceback" not in err
    return err


@pytest.mark.parametrize("argv,says", [
    (["--max-memory", f"cpu={HUGE}GB"], "--max-memory size"),
    (["--memory-budget", f"{HUGE}GB"], "--memory-budget size"),
    (["--max-input-bytes", HUGE], "memory budget"),
    (["--ray", "local", "--ray-budget", HUGE], "--ray-budget size"),
], ids=["max-memory", "memory-budget", "max-input-bytes", "ray-budget"])
def test_a_400_digit_size_is_refused_in_one_line(argv, says, capsys):
    assert main(["run", "demo:clamp", *argv]) == 2
    err = _one_line(capsys)
    assert says in err and "more than 1.0 EiB" in err and "characters)" in err, err


@pytest.mark.parametrize("digit", ["\u0663", "\u00b2"], ids=["arabic-indic-3", "superscript-2"])
@pytest.mark.parametrize("flag", ["--max-input-bytes", "--memory-budget", "--ray-budget"])
def test_a_unicode_digit_is_not_a_size(flag, digit, capsys):
    extra = ["--ray", "local"] if flag == "--ray-budget" else []  # refused before Ray starts
    assert main(["run", "demo:clamp", *extra, flag, digit + "M"]) == 2
    err = _one_line(capsys)
    assert "is not a size" in err or "write a number with a unit" in err, err


@pytest.mark.parametrize("value", [HUGE, "\u0663", "\u00b2"])
def test_the_environment_budget_is_checked_the_same_way(value, monkeypatch, capsys):
    monkeypatch.setenv("HOOKSCOPE_MAX_INPUT_BYTES", value)
    assert main(["run", "demo:clamp", "--input", "random:1x3"]) == 2
    err = _one_line(capsys)
    assert err.startswith("hookscope: error: HOOKSCOPE_MAX_INPUT_BYTES: memory budget"), err
    assert "is not a size" in err or "more than 1.0 EiB" in err, err


def test_ray_budget_without_ray_is_refused_not_ignored(capsys):
    # a bound that silently does nothing would read as if captures were bounded
    assert main(["run", "demo:clamp", "--ray-budget", "1MiB"]) == 2
    err = _one_line(capsys)
    assert "needs --ray" in err and "--memory-budget" in err


def test_random_input_for_a_dict_example_is_refused_before_allocating(capsys):
    assert main(["run", FAULTY, "--input", "random:100000x100000"]) == 2
    err = _one_line(capsys)
    assert "37.3 GiB, above the input memory budget of 4.0 GiB" in err, err


def test_random_input_for_a_dict_example_respects_a_small_budget(capsys):
    assert main(["run", FAULTY, "--input", "random:1000x1000", "--max-input-bytes", "1M"]) == 2
    assert "above the input memory budget of 1.0 MiB" in _one_line(capsys)
    assert main(["run", FAULTY, "--input", "random:2x3"]) == 0


# -- hf: folders whose configs ask for huge example inputs ------------------------------------
tf = pytest.importorskip("transformers")


def _edit_json(path: Path, **changes) -> None:
    data = json.loads(path.read_text())
    data.update(changes)
    path.write_text(json.dumps(data))


@pytest.fixture(scope="module")
def hf_folders(tmp_path_factory):
    import torch

    root = tmp_path_factory.mktemp("hf_sizes")
    torch.manual_seed(0)
    # ResNet ignores image_size itself, so only Hookscope's example image would be huge
    resnet = root / "resnet"
    tf.ResNetForImageClassification(tf.ResNetConfig(
        embedding_size=8, hidden_sizes=[8, 8], depths=[1, 1], num_labels=2)).save_pretrained(resnet)
    _edit_json(resnet / "config.json", image_size=[1_000_000, 1_000_000])
    whisper = root / "whisper"
    tf.WhisperForConditionalGeneration(tf.WhisperConfig(
        vocab_size=64, num_mel_bins=100_000, encoder_layers=1, decoder_layers=1, d_model=16,
        encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=32,
        decoder_ffn_dim=32, max_source_positions=16, max_target_positions=16,
        decoder_start_token_id=1, pad_token_id=0, bos_token_id=1, eos_token_id=2)).save_pretrained(whisper)
    w2v = root / "w2v"
    tf.Wav2Vec2ForCTC(tf.Wav2Vec2Config(
        vocab_size=12, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
        intermediate_size=32, conv_dim=(16, 16, 16), conv_stride=(5, 4, 4),
        conv_kernel=(10, 8, 4), num_conv_pos_embeddings=8,
        num_conv_pos_embedding_groups=2)).save_pretrained(w2v)
    tf.Wav2Vec2FeatureExtractor(feature_size=1, sampling_rate=10_000_000, padding_value=0.0,
                                do_normalize=True).save_pretrained(w2v)
    bad = {}
    for name, arch in (("config_class", ["GPT2Config"]), ("number", [123])):
        folder = root / name
        tf.GPT2Model(tf.GPT2Config(n_layer=1, n_embd=8, n_head=2, vocab_size=50,
                                   n_positions=16, bos_token_id=0,
                                   eos_token_id=0)).save_pretrained(folder)
        _edit_json(folder / "config.json", architectures=arch)
        bad[name] = folder
    return {"resnet": resnet, "whisper": whisper, "w2v": w2v, **bad}


def test_an_hf_image_size_from_config_goes_through_the_budget(hf_folders, capsys):
    assert main(["run", f"hf:{hf_folders['resnet']}"]) == 2
    err = _one_line(capsys)
    assert "example image (3x1000000x1000000" in err and "image_size" in err, err
    assert "above the input memory budget of 4.0 GiB" in err


def test_an_hf_num_mel_bins_from_config_goes_through_the_budget(hf_folders, capsys):
    assert main(["run", f"hf:{hf_folders['whisper']}", "--max-input-bytes", "10M"]) == 2
    err = _one_line(capsys)
    assert "100000 mel bins" in err and "above the input memory budget of 10.0 MiB" in err, err


def test_an_hf_sampling_rate_goes_through_the_budget(hf_folders, capsys):
    assert main(["run", f"hf:{hf_folders['w2v']}", "--max-input-bytes", "50M"]) == 2
    err = _one_line(capsys)
    assert "10000000 Hz" in err and "above the input memory budget of 50.0 MiB" in err, err


@pytest.mark.parametrize("name,says", [("config_class", "'GPT2Config'"), ("number", "'123'")])
def test_architectures_must_name_a_model_class(hf_folders, name, says, capsys):
    assert main(["run", f"hf:{hf_folders[name]}"]) == 2
    err = _one_line(capsys)
    assert f"architectures names {says}" in err and "not a transformers model class" in err, err
