"""The few-pass output difference agrees with the float64 reference on every kind of pair."""

from __future__ import annotations

import math

import pytest
import torch

from hookscope.core.capture.output_diff import _exact, output_difference


def reference(a, b):
    return _exact(a, b)

@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
def test_matches_float64_reference(dtype):
    g = torch.Generator().manual_seed(0)
    a = (torch.randn(1000, generator=g) * 100).to(dtype)
    b = a.clone()
    b[17] += 3.0
    b[500] -= 1e-3
    assert output_difference(a, b) == reference(a, b)
    assert output_difference(a, b)[0] is True

def test_equal_and_nan_and_inf_pairs():
    a = torch.tensor([1.0, float("nan"), 3.0])
    assert output_difference(a, a.clone()) == (False, 0.0)  # NaN in the same place
    b = torch.tensor([1.0, 2.0, 3.0])
    assert output_difference(a, b) == reference(a, b)
    assert output_difference(a, b)[1] > 1e300  # NaN against a number: as far apart as it gets
    c = torch.tensor([1.0, float("nan"), float("inf")])
    assert output_difference(a, c) == reference(a, c)

def test_large_values_are_exact_not_rounded():
    a = torch.tensor([3.0e38, 1.0], dtype=torch.float32)
    b = torch.tensor([-3.0e38, 1.0], dtype=torch.float32)  # float32 a - b overflows to inf
    assert output_difference(a, b) == reference(a, b)
    x = torch.tensor([16777216.0, 0.0])
    y = torch.tensor([0.0, 16777217.0 - 16777216.0])
    assert output_difference(x, y) == reference(x, y)

def test_integer_nested_and_shape_changes():
    a = {"logits": torch.tensor([1, 2, 3]), "aux": (torch.zeros(2),)}
    b = {"logits": torch.tensor([1, 5, 3]), "aux": (torch.zeros(2),)}
    assert output_difference(a, b) == (True, 3.0)
    assert output_difference(torch.zeros(2), torch.zeros(3)) == (True, math.inf)
