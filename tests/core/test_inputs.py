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
