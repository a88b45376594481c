"""Input sets: each format gives its inputs, labels and names as the files say."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
import torch
from PIL import Image
from safetensors.torch import save_file

from hookscope.core import InputError, load_model, parse_input
from hookscope.core.dataset import ImageFolder, JsonLines, TensorBatch, TextLines, open_inputs
from hookscope.core.dataset import text_lines


def _png(path, value: int, size=(8, 8)) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(np.full(size[::-1], value, dtype=np.uint8), "L").save(path)


def test_image_folder_classes_from_subfolders_decoded_as_run_does(tmp_path):
    for cls, vals in (("cat", (10, 20)), ("dog", (30,))):
        for v in vals:
            _png(tmp_path / cls / f"{v}.png", v, (16, 12))
    (tmp_path / "dog" / "notes.txt").write_text("not an image")
    _png(tmp_path / "dog" / "deeper" / "40.png", 40)
    lm = load_model("demo:cnn")
    s = open_inputs(tmp_path)
    assert isinstance(s, ImageFolder) and s.kind == "images"
    assert s.class_names == ["cat", "dog"] and len(s) == 4
    assert [s.label(i) for i in range(4)] == ["cat", "cat", "dog", "dog"]
    assert [s.describe(i) for i in range(4)] == ["cat/10.png", "cat/20.png", "dog/30.png",
                                                 "dog/deeper/40.png"]
    for i in range(4):  # the same tensor `hookscope run --input FILE` gives
        want = parse_input(str(s.image_path(i)), lm.example_input)
        assert torch.equal(s.item(i, lm.example_input), want)
        assert s.item(i, lm.example_input).shape == lm.example_input.shape


def test_text_lines_skip_blanks_and_keep_spaces(tmp_path):
    f = tmp_path / "p.txt"
    f.write_bytes("\ufeffthe cat \r\n\n   \nsecond line\nthird".encode())
    s = open_inputs(f)
    assert isinstance(s, TextLines) and len(s) == 3 and not s.has_labels()
    assert [s.text(i) for i in range(3)] == ["the cat ", "second line", "third"]
    lm = load_model("demo:lm")
    assert torch.equal(s.item(1, lm.example_input, lm.meaning.codec),
                       parse_input("text:second line", lm.example_input, lm.meaning.codec))
    with pytest.raises(InputError, match="outside the set"):
        s.text(3)


def test_text_lines_index_is_sparse(tmp_path, monkeypatch):
    monkeypatch.setattr(text_lines, "STRIDE", 4)
    f = tmp_path / "p.txt"
    lines = [f"line {i}" for i in range(23)]
    f.write_text("\n".join(lines))
    s = text_lines.LineIndex(f)
    assert len(s) == 23 and len(s._starts) == 6
    assert [s.line(i) for i in range(23)] == lines


def test_jsonl_text_and_labels(tmp_path):
    f = tmp_path / "s.jsonl"
    f.write_text('{"text": "a b", "label": 3}\n{"text": "c", "label": "dog"}\n')
    s = open_inputs(f)
    assert isinstance(s, JsonLines) and s.has_labels()
    assert [s.text(0), s.label(0), s.text(1), s.label(1)] == ["a b", 3, "c", "dog"]


@pytest.mark.parametrize("bad, match", [('["a"]', "no \"text\""), ("{nope", "not JSON"),
                                        ('{"text": "a", "label": [1]}', "label")])
def test_jsonl_bad_lines_name_the_line(tmp_path, bad, match):
    f = tmp_path / "s.jsonl"
    f.write_text('{"text": "ok"}\n' + bad + "\n")
    s = open_inputs(f)
    s.text(0)
    with pytest.raises(InputError, match=match) as e:
        s.label(1)
    assert "line 2" in str(e.value)


def test_pt_batch_forms(tmp_path):
    x, y = torch.randn(5, 1, 8, 8), torch.arange(5)
    for i, value in enumerate([x, {"inputs": x, "labels": y, "classes": list("abcde")}, (x, y)]):
        f = tmp_path / f"b{i}.pt"
        torch.save(value, f)
        s = open_inputs(f)
        assert isinstance(s, TensorBatch) and len(s) == 5
        assert torch.equal(s.item(2), x[2:3])
        assert s.label(2) == (None, "c", 2)[i]


def test_safetensors_batch_keywords_and_labels(tmp_path):
    ids = torch.randint(0, 20, (4, 6))
    f = tmp_path / "b.safetensors"
    save_file({"input_ids": ids, "attention_mask": torch.ones_like(ids),
               "labels": torch.tensor([1, 0, 1, 1])}, str(f))
    s = open_inputs(f)
    item = s.item(3)
    assert set(item) == {"input_ids", "attention_mask"} and torch.equal(item["input_ids"], ids[3:4])
    assert s.label(3) == 1


@pytest.mark.parametrize("value, match", [
    ({"inputs": torch.zeros(3, 2), "labels": torch.zeros(4, dtype=torch.long)}, "labels"),
    ({"a": torch.zeros(3, 2), "b": torch.zeros(4, 2)}, "first axis"),
    ({"inputs": torch.zeros(3, 2), "labels": torch.zeros(3)}, "integer"),
])
def test_tensor_batches_that_disagree_are_refused(tmp_path, value, match):
    f = tmp_path / "b.pt"
    torch.save(value, f)
    with pytest.raises(InputError, match=match):
        open_inputs(f)


def test_unknown_and_missing_inputs(tmp_path):
    with pytest.raises(InputError, match="do not exist"):
        open_inputs(tmp_path / "nope")
    (tmp_path / "x.csv").write_text("a,b")
    with pytest.raises(InputError, match="give a folder of images"):
        open_inputs(tmp_path / "x.csv")
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match="holds no image"):
        open_inputs(tmp_path / "empty")
    (tmp_path / "e.txt").write_text("\n \n")
    with pytest.raises(InputError, match="no line of text"):
        open_inputs(tmp_path / "e.txt")


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from(["", " ", "\t", "a", "bc d", "é", "x\r", "  y  ", "🙂"]),
                max_size=40), st.integers(1, 9), st.integers(1, 5))
def test_line_index_equals_splitting_the_whole_file(pieces, chunk, stride):
    import tempfile
    from pathlib import Path

    data = "\n".join(pieces).encode()
    want = [ln.rstrip("\r") for ln in data.decode().split("\n") if ln.strip()]
    with tempfile.TemporaryDirectory() as d, \
            pytest.MonkeyPatch.context() as mp:
        mp.setattr(text_lines, "_CHUNK", chunk)  # lines and characters across chunk edges
        mp.setattr(text_lines, "STRIDE", stride)
        f = Path(d) / "p.txt"
        f.write_bytes(data)
        li = text_lines.LineIndex(f)
        assert [li.line(i) for i in range(len(li))] == want


def test_an_image_stands_for_its_folder_of_images(tmp_path):
    """A class subfolder's image stands for the whole ImageFolder; an image in a flat folder
    (or beside loose images in the parent) for its own folder."""
    from hookscope.core.dataset import image_set_root

    layered = tmp_path / "layered"
    for cls in ("a", "b"):
        (layered / cls).mkdir(parents=True)
        (layered / cls / "0.png").write_bytes(b"")
    assert image_set_root(layered / "a" / "0.png") == layered
    flat = tmp_path / "alone" / "flat"   # no sibling folder: not one class of many
    flat.mkdir(parents=True)
    (flat / "0.png").write_bytes(b"")
    assert image_set_root(flat / "0.png") == flat
    mixed = tmp_path / "mixed"
    (mixed / "a").mkdir(parents=True)
    (mixed / "b").mkdir()
    (mixed / "loose.png").write_bytes(b"")
    assert image_set_root(mixed / "a" / "0.png") == mixed / "a"
