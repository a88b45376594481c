"""Text from files and models reaches the terminal as text, never as terminal commands.

A labels file, a layer name or a tokenizer's token can hold ESC (colour, cursor
moves, window-title escapes), BEL or a bare CR (which rewrites the line). What
``hookscope run`` prints carries them escaped (``\\x1b``, ``\\x07``, ``\\r``),
the way typed text already is.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from hookscope.app.cli import main

RAW = ("\x1b", "\x07", "\r", "\x9b")  # ESC, BEL, CR, the 8-bit CSI


def _no_raw_controls(text: str) -> None:
    for ch in RAW:
        assert ch not in text, f"{ch!r} reached the terminal"


MODEL = '''
import torch
from torch import nn


def build():
    torch.manual_seed(0)
    m = nn.Sequential()
    m.add_module("\\x1b]0;owned\\x07\\x1b[2Jlayer\\r", nn.Linear(3, 4))
    return m, torch.tensor([[1.0, 2.0, 3.0]])
'''


def test_labels_file_controls_are_escaped(tmp_path, capsys):
    (tmp_path / "net.py").write_text(MODEL)
    labels = tmp_path / "labels.txt"
    labels.write_text("\n".join(f"\x1b[31mred{i}\x07\x1b]0;title\x07\rX\x9b2J"
                                for i in range(4)), encoding="utf-8", newline="")
    assert main(["run", f"{tmp_path / 'net.py'}:build", "--labels", str(labels)]) == 0
    out, err = capsys.readouterr()
    _no_raw_controls(out + err)
    assert "top classes" in out and "\\x1b[31mred" in out and "\\x07" in out


def test_layer_names_with_controls_are_escaped(tmp_path, capsys):
    (tmp_path / "net.py").write_text(MODEL)
    name = "\x1b]0;owned\x07\x1b[2Jlayer\r"
    assert main(["run", f"{tmp_path / 'net.py'}:build", "--clamp", f"{name}=-0.1:0.1"]) == 0
    out, err = capsys.readouterr()
    _no_raw_controls(out + err)
    assert "\\x1b]0;owned\\x07\\x1b[2Jlayer\\r" in out  # the layer's row, escaped


def test_an_error_naming_the_layer_is_escaped(tmp_path, capsys):
    (tmp_path / "net.py").write_text(MODEL)
    assert main(["run", f"{tmp_path / 'net.py'}:build", "--capture", "\x1b[2Jnope\x07"]) == 2
    out, err = capsys.readouterr()
    _no_raw_controls(out + err)
    assert err.count("\n") == 1


def _hf_models():
    spec = importlib.util.spec_from_file_location(
        "hf_models_for_escapes", Path(__file__).parents[1] / "core" / "hf_models.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_tokenizer_tokens_with_controls_are_escaped(tmp_path, capsys):
    pytest.importorskip("transformers")
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    tok = _hf_models().tokenizer()
    evil = "\x1b]0;owned\x07\x1b[2J\r"
    tok.add_tokens([evil])
    torch.manual_seed(0)
    cfg = GPT2Config(n_layer=1, n_embd=16, n_head=2, vocab_size=len(tok), n_positions=32,
                     bos_token_id=0, eos_token_id=0)
    GPT2LMHeadModel(cfg).save_pretrained(tmp_path)
    tok.save_pretrained(tmp_path)
    capsys.readouterr()  # save_pretrained's progress bar
    assert main(["run", f"hf:{tmp_path}", "--input", f"text:the dog{evil}sat",
                 "--clamp", "transformer.h.0.mlp=-0.1:0.1"]) == 0
    out, err = capsys.readouterr()
    _no_raw_controls(out + err)
    assert "\\x1b]0;owned\\x07\\x1b[2J\\r" in out  # the token, shown escaped
