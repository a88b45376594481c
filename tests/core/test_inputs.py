"""Input specs to tensors, and the mistakes a person can make with them."""

import numpy as np
import pytest
import torch

from hookscope.core import ForwardError, InputError, Plan, compare, load_model, parse_input


def test_literal_and_dtype_follows_example():
    assert torch.equal(parse_input("[[1, 2, 3]]"), torch.tensor([[1.0, 2.0, 3.0]]))
    tokens = parse_input("[[1, 2, 3]]", example=torch.zeros(1, 3, dtype=torch.long))
    assert tokens.dtype == torch.long
    a, b = parse_input("([1.0], [2.0, 3.0])")
    assert a.shape == (1,) and b.shape == (2,)


def test_example_keyword_and_empty_give_a_copy():
    ex = torch.ones(2)
    got = parse_input("", ex)
    assert torch.equal(got, ex) and got is not ex
    assert torch.equal(parse_input("example", ex), ex)


def test_random_is_seeded_and_shaped():
    a = parse_input("random:1x3x8x8:seed=5")
    b = parse_input("random:1x3x8x8:seed=5")
    assert a.shape == (1, 3, 8, 8) and torch.equal(a, b)
    assert not torch.equal(a, parse_input("random:1x3x8x8:seed=6"))
    t = parse_input("random:2x12:high=16", example=torch.zeros(1, 3, dtype=torch.long))
    assert t.dtype == torch.long and int(t.max()) < 16
    assert parse_input("random:4:dtype=float64").dtype == torch.float64


def test_npy_and_pt_files(tmp_path):
    np.save(tmp_path / "x.npy", np.arange(6, dtype=np.float32).reshape(2, 3))
    assert parse_input(str(tmp_path / "x.npy")).shape == (2, 3)
    torch.save((torch.ones(1), torch.zeros(2)), tmp_path / "x.pt")
    a, b = parse_input(str(tmp_path / "x.pt"))
    assert a.shape == (1,) and b.shape == (2,)


@pytest.mark.parametrize("text, match", [
    ("[[1, 2", "not a valid literal"),
    ("[[1, 2], [3]]", "rectangular"),
    ("random:", "needs a shape"),
    ("random:1xq", "bad shape"),
    ("random:2:seed=abc", "integers"),
    ("random:2:colour=red", "unknown option"),
    ("random:2:dtype=float7", "unknown dtype"),
    ("hello", "cannot read input"),
    ("nope.npy", "does not exist"),
])
def test_bad_inputs(text, match):
    with pytest.raises(InputError, match=match):
        parse_input(text)


def test_object_npy_refused(tmp_path):
    f = tmp_path / "obj.npy"
    np.save(f, np.array([{"a": 1}], dtype=object), allow_pickle=True)
    with pytest.raises(InputError, match="pickles"):
        parse_input(str(f))


def test_wrong_shape_is_a_clear_forward_error():
    lm = load_model("demo:clamp")
    x = parse_input("[[1.0, 2.0]]", lm.example_input)
    with pytest.raises(ForwardError, match=r"\(1, 2\) float32.*shape"):
        compare(lm.module, x, Plan(capture=["0"]))
    assert not lm.module[0]._forward_hooks


def test_image_shaped_like_the_example(tmp_path):
    from PIL import Image

    lm = load_model("demo:cnn")
    digit = (lm.example_input[0, 0].numpy() * 255).astype(np.uint8)
    Image.fromarray(digit).resize((32, 32), Image.Resampling.NEAREST).save(tmp_path / "d.png")
    x = parse_input(str(tmp_path / "d.png"), lm.example_input)
    assert x.shape == (1, 1, 8, 8) and x.dtype == torch.float32 and 0 <= x.min() <= x.max() <= 1
    assert int(lm.module(x).argmax()) == int(lm.module(lm.example_input).argmax())  # still a 7
    inv = parse_input(str(tmp_path / "d.png") + ":invert", lm.example_input)
    assert torch.allclose(inv, 1 - x)
    Image.new("RGB", (5, 7), (255, 0, 0)).save(tmp_path / "red.png")
    rgb = parse_input(str(tmp_path / "red.png"))
    assert rgb.shape == (1, 3, 7, 5) and float(rgb[0, 0].min()) == 1.0 and float(rgb[0, 1].max()) == 0.0


def test_bad_image(tmp_path):
    (tmp_path / "x.png").write_bytes(b"not a png")
    with pytest.raises(InputError, match="x.png is not a PNG, JPEG, BMP, GIF, WebP or TIFF image"):
        parse_input(str(tmp_path / "x.png"))
    with pytest.raises(InputError, match="does not exist"):
        parse_input(str(tmp_path / "nope.jpg"))


def test_relative_paths_are_files_not_literals(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    np.save("x.npy", np.ones((1, 3), dtype=np.float32))
    assert parse_input("./x.npy").shape == (1, 3)
    assert float(parse_input(".5")) == 0.5


def test_big_endian_npy_and_huge_seed(tmp_path):
    np.save(tmp_path / "be.npy", np.array([1.0, 2.0], dtype=">f4"))
    assert parse_input(str(tmp_path / "be.npy")).tolist() == [1.0, 2.0]
    with pytest.raises(InputError, match="out of range"):
        parse_input("random:2:seed=99999999999999999999999")
