"""Tests for hookscope.core.demos.demo_models: the demos are what they claim to be."""

from __future__ import annotations

import json
from collections import OrderedDict

import numpy as np
import pytest
import torch
from safetensors.torch import load
from torch import nn

from hookscope.core.demos import demo_models as dm


def _assert_same_module(a: nn.Module, b: nn.Module) -> None:
    sa, sb = a.state_dict(), b.state_dict()
    assert list(sa) == list(sb)
    for k in sa:
        assert torch.equal(sa[k], sb[k]), k


def test_clamp_demo_equals_plain_seeded_script() -> None:
    model, x = dm.clamp_demo()
    torch.manual_seed(42)
    ref = nn.Sequential(nn.Linear(3, 4), nn.Linear(4, 2))
    _assert_same_module(model, ref)
    assert torch.equal(x, torch.tensor([[1.0, 2.0, 3.0]]))
    assert not model.training
    with torch.no_grad():
        assert torch.equal(model(x), ref(x))


def test_features_demo_equals_plain_seeded_script() -> None:
    model, x = dm.features_demo()
    torch.manual_seed(42)
    ref = nn.Sequential(
        OrderedDict(
            fc1=nn.Linear(4, 8),
            relu1=nn.ReLU(),
            fc2=nn.Linear(8, 4),
            relu2=nn.ReLU(),
            fc3=nn.Linear(4, 2),
        )
    )
    _assert_same_module(model, ref)
    assert [n for n, _ in model.named_children()] == ["fc1", "relu1", "fc2", "relu2", "fc3"]
    assert torch.equal(x, torch.tensor([[1.0, 2.0, 3.0, 4.0]]))
    assert not model.training


def test_demos_are_independent_of_prior_rng_state() -> None:
    torch.rand(100)
    a, _ = dm.clamp_demo()
    torch.rand(7)
    b, _ = dm.clamp_demo()
    _assert_same_module(a, b)


def test_cnn_demo_predicts_shipped_label() -> None:
    model, x = dm.cnn_demo()
    assert isinstance(model, dm.DigitsCNN)
    assert not model.training
    assert x.dtype == torch.float32 and x.shape == (1, 1, 8, 8)
    meta = json.loads(dm.resource_path("digits_sample.json").read_text(encoding="utf-8"))
    assert meta["source"].startswith("sklearn load_digits test split index ")
    with torch.no_grad():
        pred = int(model(x).argmax(1))
    assert pred == meta["label"] == dm.cnn_sample_label()


def test_cnn_children_order_and_inplace_relus() -> None:
    model = dm.DigitsCNN()
    names = [n for n, _ in model.named_children()]
    assert names == [
        "conv1", "bn1", "relu1", "pool1", "conv2", "bn2", "relu2", "pool2", "flatten", "fc",
    ]
    assert model.relu1.inplace and model.relu2.inplace


def test_transformer_demo_shape_and_determinism() -> None:
    model, x = dm.transformer_demo()
    assert isinstance(model, dm.TinyTransformer)
    assert not model.training
    assert x.dtype == torch.long and x.shape == (1, 12)
    with torch.no_grad():
        out1 = model(x)
        out2 = model(x)
    assert out1.shape == (1, 12, 16)
    assert torch.equal(out1, out2)
    model2, x2 = dm.transformer_demo()
    assert torch.equal(x, x2)
    with torch.no_grad():
        assert torch.equal(model2(x2), out1)


def test_transformer_demo_sorts_its_sample() -> None:
    model, x = dm.transformer_demo()
    with torch.no_grad():
        pred = model(x).argmax(-1)
    assert torch.equal(pred, x.sort(dim=1).values)


@pytest.mark.parametrize(
    ("name", "cls"),
    [("digits_cnn.safetensors", dm.DigitsCNN), ("tiny_transformer.safetensors", dm.TinyTransformer)],
)
def test_weight_files_load_with_safetensors(name: str, cls: type[nn.Module]) -> None:
    data = dm.resource_path(name).read_bytes()
    assert len(data) < 1_000_000
    state = load(data)
    model = cls()
    assert set(state) == set(model.state_dict())
    model.load_state_dict(state, strict=True)


def test_digits_sample_file() -> None:
    with dm.resource_path("digits_sample.npy").open("rb") as fh:
        arr = np.load(fh)
    assert arr.dtype == np.float32 and arr.shape == (1, 1, 8, 8)
    assert 0.0 <= arr.min() and arr.max() <= 1.0


def test_registry() -> None:
    assert list(dm.DEMOS) == ["clamp", "features", "cnn", "transformer", "lm", "detector"]
    assert set(dm.DEMO_DESCRIPTIONS) == set(dm.DEMOS)
    for name, factory in dm.DEMOS.items():
        model, x = factory()
        assert isinstance(model, nn.Module) and not model.training, name
        assert dm.DEMO_DESCRIPTIONS[name].strip(), name
