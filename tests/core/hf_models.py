"""Small Hugging Face models for tests, built from configs and saved to a folder; nothing downloaded.

Each builder writes ``save_pretrained`` output (and a tokenizer trained here
with ``tokenizers`` where the model takes text) into ``folder`` and returns it.
"""

from __future__ import annotations

from pathlib import Path

import torch

CORPUS = ["The quick brown fox jumps over the lazy dog",
          "hello world this is a small test of a tiny tokenizer",
          "a cat sat on the mat and the dog sat on the log"] * 5


def tokenizer(kind: str = "bpe"):
    """A fast tokenizer trained on :data:`CORPUS` (byte-level BPE, or WordPiece for BERT)."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    if kind == "wordpiece":
        tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
        tok.pre_tokenizer = pre_tokenizers.Whitespace()
        tr = trainers.WordPieceTrainer(vocab_size=150, special_tokens=["[UNK]", "[PAD]", "[CLS]",
                                                                         "[SEP]", "[MASK]"])
    else:
        tok = Tokenizer(models.BPE(unk_token="[UNK]"))
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        tr = trainers.BpeTrainer(vocab_size=300, special_tokens=["[UNK]", "[PAD]"],
                                 initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(CORPUS, tr)
    return PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]", pad_token="[PAD]",
                                   mask_token="[MASK]" if kind == "wordpiece" else None)


def gpt2(folder: Path, layers: int = 2, width: int = 32, vocab_size: int | None = None) -> Path:
    from transformers import GPT2Config, GPT2LMHeadModel

    tok = tokenizer()
    torch.manual_seed(0)
    cfg = GPT2Config(n_layer=layers, n_embd=width, n_head=2, vocab_size=vocab_size or len(tok),
                     n_positions=64,
                     bos_token_id=0, eos_token_id=0)
    GPT2LMHeadModel(cfg).save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder


def bert(folder: Path) -> Path:
    from transformers import BertConfig, BertForMaskedLM

    tok = tokenizer("wordpiece")
    torch.manual_seed(0)
    cfg = BertConfig(vocab_size=len(tok), hidden_size=32, num_hidden_layers=2,
                     num_attention_heads=2, intermediate_size=64, max_position_embeddings=64,
                     pad_token_id=1)
    BertForMaskedLM(cfg).save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder


def llama(folder: Path) -> Path:
    from transformers import LlamaConfig, LlamaForCausalLM

    tok = tokenizer()
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=len(tok), hidden_size=32, intermediate_size=64,
                      num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1,
                      max_position_embeddings=64, bos_token_id=0, eos_token_id=0, pad_token_id=1)
    LlamaForCausalLM(cfg).save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder


def vit(folder: Path) -> Path:
    from transformers import ViTConfig, ViTForImageClassification

    torch.manual_seed(0)
    labels = ["cat", "dog", "fox"]
    cfg = ViTConfig(image_size=32, patch_size=8, num_hidden_layers=2, hidden_size=32,
                    num_attention_heads=2, intermediate_size=64, num_labels=3,
                    id2label=dict(enumerate(labels)), label2id={n: i for i, n in enumerate(labels)})
    ViTForImageClassification(cfg).save_pretrained(folder)
    return folder


def t5(folder: Path) -> Path:
    from transformers import T5Config, T5ForConditionalGeneration

    tok = tokenizer()
    torch.manual_seed(0)
    cfg = T5Config(vocab_size=len(tok), d_model=32, d_kv=8, d_ff=64, num_layers=1,
                   num_decoder_layers=1, num_heads=2, decoder_start_token_id=1, pad_token_id=1,
                   eos_token_id=0)
    T5ForConditionalGeneration(cfg).save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder
