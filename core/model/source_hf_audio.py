"""Example inputs for Hugging Face speech models (Whisper, wav2vec2 and their kin).

A speech model takes no ``input_ids``: Whisper takes ``input_features`` (a
log-mel spectrogram, ``1 x num_mel_bins x frames``) and a decoder start,
wav2vec2 takes ``input_values`` (the waveform, ``1 x samples``). The example
is one second of a 440 Hz sine:

- through the folder's feature extractor when it has one (at its sampling
  rate), so the numbers are what the model's users feed it; Whisper's frames
  are then cut (or padded) to the ``2 * max_source_positions`` its encoder
  takes, as the extractor's 30-second padding does for the full-size model;
- else from the config alone: the waveform normalised to zero mean and unit
  variance (wav2vec2's extractor does that), or a smooth deterministic
  spectrogram of ``num_mel_bins x 2 * max_source_positions`` in Whisper's
  normalised range [-1, 1].

An encoder-decoder (Whisper) also gets ``decoder_input_ids`` from its
``decoder_start_token_id``. Pure torch + numpy, no Qt.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch

from .budget import check_input_size
from ..base.errors import SpecError
from ..base.user_text import shown

AUDIO_INPUTS = ("input_features", "input_values")
SINE_HZ = 440.0
DEFAULT_RATE = 16_000


def sine_wave(rate: int, seconds: float = 1.0, hz: float = SINE_HZ) -> np.ndarray:
    """``seconds`` of a sine at ``hz``, amplitude 0.5, as float32 samples."""
    t = np.arange(int(rate * seconds), dtype=np.float64) / rate
    return (0.5 * np.sin(2 * math.pi * hz * t)).astype(np.float32)


def _extractor(tf: Any, where: str) -> Any:
    try:
        return tf.AutoFeatureExtractor.from_pretrained(where, local_files_only=True,
                                                       trust_remote_code=False)
    except Exception:  # none saved in the folder: the config alone says enough
        return None


def config_count(value: Any, key: str, file: str = "config.json") -> int:
    """A size read from a model folder's ``file``, as a positive int; :class:`SpecError`
    saying which key holds what instead."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value \
            or value <= 0 or value != int(value):
        raise SpecError(f"{file}'s {key} {shown(value, 60)} is not a positive whole number: "
                        "fix it in the model's folder")
    return int(value)


def _frames(config: Any) -> int | None:
    n = getattr(config, "max_source_positions", None)
    # Whisper's encoder halves the frames with a stride-2 conv
    return 2 * config_count(n, "max_source_positions") if n else None


def _fit_frames(features: torch.Tensor, frames: int | None) -> torch.Tensor:
    """Cut or pad (with the quietest value) the last axis to ``frames``."""
    if frames is None or features.shape[-1] == frames:
        return features
    if features.shape[-1] > frames:
        return features[..., :frames].contiguous()
    check_input_size(features[..., :1].numel() * frames * 4 * 2,
                     f"the example spectrogram padded to {frames} frames (config.json's "
                     "max_source_positions)")
    pad = features.new_full((*features.shape[:-1], frames - features.shape[-1]),
                            float(features.min()))
    return torch.cat([features, pad], dim=-1)


def _from_config(main: str, config: Any) -> torch.Tensor:
    if main == "input_values":
        wave = torch.from_numpy(sine_wave(DEFAULT_RATE))
        return ((wave - wave.mean()) / (wave.std() + 1e-7)).unsqueeze(0)
    bins = config_count(getattr(config, "num_mel_bins", 80), "num_mel_bins")
    frames = _frames(config) or 3000
    check_input_size(bins * frames * 4 * 3, f"the example spectrogram ({bins} mel bins x "
                     f"{frames} frames, from config.json's num_mel_bins and max_source_positions)")
    mel = torch.linspace(0, 1, bins).view(bins, 1)
    t = torch.linspace(0, 1, frames).view(1, frames)
    # a band of energy low in the spectrum, steady in time, in Whisper's [-1, 1]
    return (torch.exp(-((mel - 0.2) ** 2) / 0.01) * 1.6 - 0.8 + 0.1 * torch.sin(40 * t)).unsqueeze(0)


def audio_example(tf: Any, model: Any, config: Any,
                  where: str) -> tuple[dict[str, torch.Tensor], tuple[str, ...]] | None:
    """The example keywords of a speech model, or ``None`` when ``model`` is not one."""
    main = getattr(model, "main_input_name", "input_ids")
    if main not in AUDIO_INPUTS:
        return None
    fe = _extractor(tf, where)
    x: torch.Tensor | None = None
    if fe is not None:
        rate = config_count(getattr(fe, "sampling_rate", DEFAULT_RATE) or DEFAULT_RATE,
                            "sampling_rate",
                            "preprocessor_config.json")
        # a second of sound at that rate, as float64 times then float32 samples
        check_input_size(rate * 12, f"the example sound (a second at {rate} Hz, the feature "
                         "extractor's sampling_rate)")
        enc = fe(sine_wave(rate), sampling_rate=rate, return_tensors="pt")
        value = enc.get(main) if hasattr(enc, "get") else None
        if isinstance(value, torch.Tensor):
            x = value.float()
            if main == "input_features":
                x = _fit_frames(x, _frames(config))
    if x is None:
        x = _from_config(main, config).float()
    example: dict[str, torch.Tensor] = {main: x}
    if getattr(config, "is_encoder_decoder", False):
        start = next((t for t in (getattr(config, "decoder_start_token_id", None),
                                  getattr(config, "pad_token_id", None)) if t is not None), 0)
        example["decoder_input_ids"] = torch.tensor([[int(start)]])
    return example, tuple(example)
