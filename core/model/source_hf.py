"""``hf:NAME_OR_DIR``: a Hugging Face ``transformers`` model, from a local folder or the local cache.

Nothing is downloaded (``local_files_only=True``): ``NAME_OR_DIR`` is a
folder written by ``save_pretrained`` or a model id already in the Hugging
Face cache. The class comes from the config's ``architectures`` (the head the
model was saved with, e.g. ``GPT2LMHeadModel``), else ``AutoModel``. The
tokenizer is loaded when the folder has one; the example input is a default
prompt through it (``input_ids``, ``attention_mask``, ...) as keywords; for a
vision model, a ``pixel_values`` image of the config's size and channels
normalised as its image processor says; for a speech model (Whisper,
wav2vec2), a second of a sine through its feature extractor
(:mod:`.source_hf_audio`).

The output meaning follows the head: ``...LMHeadModel``/``...ForCausalLM``/
``...ForMaskedLM`` give token scores over the tokenizer's vocabulary,
``...ForSequenceClassification``/``...ForImageClassification`` give classes
labelled by ``config.id2label``, ``...ForCTC`` token scores per audio frame,
``...ForObjectDetection`` (DETR) boxes (:mod:`.detections`).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import torch

from .budget import check_input_size
from ..base.regular_file import kind_of
from ..base.errors import SpecError
from .hf_custom_code import model_folder, refuse_custom_code
from ..base.meaning import CLASSES, DETECTIONS, GENERIC, TOKENS, OutputMeaning
from .source_hf_audio import audio_example, config_count
from ..base.text_codec import HFCodec
from ..base.user_text import shown
from .loaded_model import LoadedModel

DEFAULT_PROMPT = "The quick brown fox jumps over the lazy dog"


def _transformers(spec: str):
    try:
        import transformers  # lazy: optional (the hf extra), and heavy
    except Exception as exc:  # absent, or present but broken
        raise SpecError(missing_package(spec, "transformers", "hf", exc)) from exc
    transformers.utils.logging.disable_progress_bar()  # no bars on a CLI's stderr
    return transformers


def _head_kind(arch: str) -> str:
    if arch.endswith(("LMHeadModel", "ForCausalLM", "ForMaskedLM", "ForConditionalGeneration",
                      "ForCTC")):
        return TOKENS
    if arch.endswith("ForObjectDetection"):
        return DETECTIONS
    if arch.endswith(("ForSequenceClassification", "ForImageClassification",
                      "ForAudioClassification", "ForTokenClassification")):
        return CLASSES
    return GENERIC


def load_hf(spec: str) -> Any:
    name = spec.removeprefix("hf:").strip()
    if not name:
        raise SpecError("hf: needs a model: hf:path/to/saved_dir or hf:org/model already in "
                        "the local Hugging Face cache")
    tf = _transformers(spec)
    local = str(Path(name).expanduser()) if Path(name).expanduser().is_dir() else None
    where = local or name
    if local is not None:
        _only_regular_files(Path(where))  # transformers opens them by name: a FIFO would block
    # a folder's own code is named and refused before transformers reads anything;
    # trust_remote_code=False everywhere below, so transformers never asks on stdin
    refuse_custom_code(name, model_folder(name, local))
    try:
        config = tf.AutoConfig.from_pretrained(where, local_files_only=True, trust_remote_code=False)
    except (OSError, ValueError) as exc:
        if "trust_remote_code" in str(exc):  # custom code that the auto_map check did not see
            raise SpecError(f"hf:{name} needs its own Python code; Hookscope never runs a model's "
                            "code (trust_remote_code=False), so nothing was run") from exc
        raise SpecError(f"no Hugging Face model {name!r} here: give a folder written by "
                        "save_pretrained, or a model id already in the local cache "
                        f"({os.environ.get('HF_HOME', '~/.cache/huggingface')}); nothing is "
                        "downloaded") from exc
    cls = _model_class(tf, config.architectures)
    try:
        model = cls.from_pretrained(where, local_files_only=True, trust_remote_code=False)
    except Exception as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise SpecError(f"cannot load the weights of {name!r} as {cls.__name__}: "
                        f"{type(exc).__name__}: {first}") from exc
    if hasattr(model.config, "use_cache"):
        model.config.use_cache = False  # no key/value cache in the outputs: logits only
    codec = _tokenizer(tf, where)
    kind = _head_kind(type(model).__name__)
    labels = None
    if kind in (CLASSES, DETECTIONS) and getattr(config, "id2label", None):
        labels = [str(config.id2label[i]) for i in sorted(config.id2label)]
    meaning = OutputMeaning(kind=kind, field="logits", labels=labels, codec=codec,
                            causal=not type(model).__name__.endswith(("ForMaskedLM", "ForCTC")))
    example, keys = _example(tf, model, config, where, codec)
    meaning.input_keys = keys
    notes = [] if codec or kind != TOKENS else [
        "no tokenizer in this folder: text: inputs are off, token ids show as numbers"]
    desc = f"Hugging Face {type(model).__name__} from {name}"
    return LoadedModel(model, example, spec, "hf", desc, meaning=meaning, notes=notes)


def _only_regular_files(folder: Path) -> None:
    """Refuse a model folder holding a FIFO, socket, device or a symlink to one (such as
    ``config.json -> /dev/zero``): transformers would block on it or read it without end."""
    try:
        entries = list(os.scandir(folder))
    except OSError as exc:
        raise SpecError(f"cannot list the model folder {shown(str(folder))}: "
                        f"{exc.strerror or exc}") from exc
    for entry in entries:
        try:
            if entry.is_dir() or entry.is_file():  # both follow symlinks
                continue
            mode = os.stat(entry.path).st_mode
        except OSError:  # a dangling symlink: transformers reports it if it needs the file
            continue
        raise SpecError(f"the model folder {shown(str(folder))} holds {shown(entry.name)}, which is "
                        f"{kind_of(mode)}, not a regular file: replace it with the file itself")


def _model_class(tf, architectures: Any) -> Any:
    """The class ``config.json``'s ``architectures`` names (its first entry), else ``AutoModel``;
    :class:`SpecError` for a name that is not a transformers model class."""
    if not architectures:
        return tf.AutoModel
    arch = architectures[0] if isinstance(architectures, (list, tuple)) else architectures
    cls = getattr(tf, arch, None) if isinstance(arch, str) and arch.isidentifier() else None
    # a model whose backend is missing is a placeholder class: its load says what to install
    placeholder = type(cls).__name__ == "DummyObject"
    if not placeholder and not (isinstance(cls, type) and issubclass(cls, tf.PreTrainedModel)):
        raise SpecError(f"config.json's architectures names {shown(arch, 60)}, which is not a "
                        "transformers model class (such as GPT2LMHeadModel): correct it, or "
                        "remove the key to load the plain model")
    return cls


def _tokenizer(tf, where: str) -> HFCodec | None:
    try:
        tok = tf.AutoTokenizer.from_pretrained(where, local_files_only=True, trust_remote_code=False)
    except Exception:  # many models (vision) have none; that is not an error
        return None
    return HFCodec(tok) if tok is not None and callable(tok) else None


def _example(tf, model, config, where: str, codec: HFCodec | None) -> tuple[Any, tuple[str, ...]]:
    main = getattr(model, "main_input_name", "input_ids")
    audio = audio_example(tf, model, config, where)  # Whisper, wav2vec2: a second of a sine
    if audio is not None:
        return audio
    if main == "pixel_values":
        return {"pixel_values": _pixel_values(tf, config, where)}, ("pixel_values",)
    if main != "input_ids":
        raise SpecError(f"{type(model).__name__} takes {main!r} as its input, which Hookscope "
                        "cannot make an example of: load it with a factory (file.py:f) that "
                        "returns (model, example_input)")
    if codec is not None:
        enc = codec.encode_batch(DEFAULT_PROMPT)
        enc = {k: v for k, v in enc.items() if isinstance(v, torch.Tensor)}
    else:
        vocab = int(getattr(config, "vocab_size", 2) or 2)
        ids = torch.randint(0, vocab, (1, 8), generator=torch.Generator().manual_seed(0))
        enc = {"input_ids": ids, "attention_mask": torch.ones_like(ids)}
    if getattr(config, "is_encoder_decoder", False):
        # an encoder-decoder (T5, BART) also needs the decoder's start: one step of output
        start = next((t for t in (getattr(config, "decoder_start_token_id", None),
                                  getattr(config, "pad_token_id", None)) if t is not None), 0)
        enc["decoder_input_ids"] = torch.tensor([[int(start)]])
    return enc, tuple(enc)


def _pixel_values(tf, config, where: str) -> torch.Tensor:
    """A smooth test image of the model's size, normalised like its image processor does."""
    size = getattr(config, "image_size", 224)
    try:
        h, w = (size, size) if isinstance(size, int) else tuple(size)[:2]
        h, w = config_count(h, "image_size"), config_count(w, "image_size")
    except (TypeError, ValueError) as exc:
        raise SpecError(f"config.json's image_size {shown(size, 60)} is not one or two positive "
                        "whole numbers: fix it (e.g. 224)") from exc
    channels = config_count(getattr(config, "num_channels", 3), "num_channels")
    # the image is made here, from sizes a config file gives: within the input budget first
    check_input_size(channels * h * w * 4, f"the example image ({channels}x{h}x{w} from "
                     "config.json's num_channels and image_size)")
    mean, std = [0.5] * channels, [0.5] * channels
    try:
        proc = tf.AutoImageProcessor.from_pretrained(where, local_files_only=True,
                                                     trust_remote_code=False)
        mean = list(getattr(proc, "image_mean", mean))
        std = list(getattr(proc, "image_std", std))
    except Exception:  # no processor saved: ViT's defaults (0.5, 0.5)
        pass
    return normalised_test_image(channels, h, w, mean, std)


def normalised_test_image(channels: int, h: int, w: int, mean: list[float],
                          std: list[float]) -> torch.Tensor:
    """A deterministic smooth colour gradient (1 x C x H x W), normalised by ``mean``/``std``.

    Its sizes may come from a file (a config, a cached pretrained config): within the
    input budget, checked before anything is made."""
    check_input_size(channels * h * w * 4, f"the example image ({channels}x{h}x{w})")
    ys = torch.linspace(0, 1, h).view(h, 1)
    xs = torch.linspace(0, 1, w).view(1, w)
    planes = [(xs * (1 - ys) + 0.5 * ys * (c % 2)) % 1.0 for c in range(channels)]
    img = torch.stack(planes).clamp(0, 1)
    m = torch.tensor(mean[:channels]).view(-1, 1, 1)
    s = torch.tensor(std[:channels]).view(-1, 1, 1)
    return ((img - m) / s).unsqueeze(0).float()


def missing_package(spec: str, package: str, extra: str, exc: BaseException) -> str:
    """The message for an adapter whose package is absent or broken."""
    if isinstance(exc, ModuleNotFoundError):
        return (f"{spec} needs the {package} package, which is not installed: "
                f"pip install 'hookscope[{extra}]'")
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return (f"{spec} needs the {package} package, which is installed but fails to import "
            f"({type(exc).__name__}: {first}); reinstall a build that matches your torch")
