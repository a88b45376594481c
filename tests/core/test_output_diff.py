"""The few-pass output difference agrees with the float64 reference on every kind of pair."""

from __future__ import annotations

import math

import pytest
import torch

from hookscope.core.engine.output_diff import _exact, output_change, output_difference


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


def _relative_reference(a, b):
    d = (b.double() - a.double()).nan_to_num(nan=0.0)
    den = a.double().nan_to_num(nan=0.0).square().sum()
    return math.sqrt(float(d.square().sum()) / float(den))


@pytest.mark.parametrize("n", [5, 4096, 4096 * 3 + 17, 128 * 50257 // 64])
def test_largest_difference_exact_across_blocks(n):
    """The blocks holding the largest rounded difference are recomputed in float64: the
    answer equals the float64 reference however the values fall into blocks."""
    g = torch.Generator().manual_seed(n)
    a = torch.randn(n, generator=g) * 1000
    b = a + torch.randn(n, generator=g) * 1e-3
    b[n // 2] += 0.5
    b[-1] -= 0.5   # a tie in float32 with the middle one, maybe not in float64
    assert output_difference(a, b) == reference(a, b)
    differ, worst, rel = output_change(a, b)
    assert (differ, worst) == reference(a, b)
    assert rel == pytest.approx(_relative_reference(a, b), rel=1e-5)


def test_many_tied_blocks_and_strided_outputs():
    a = torch.randn(64, 4096 * 2, generator=torch.Generator().manual_seed(1))
    b = a + 0.25   # every element ties: more tied blocks than are recomputed one by one
    assert output_difference(a, b) == reference(a, b)
    at, bt = a.t(), (a + torch.linspace(0, 1, a.numel()).reshape(a.shape)).t()
    assert not at.is_contiguous()
    assert output_difference(at, bt) == reference(at, bt)
    assert output_change(at, bt)[2] == pytest.approx(_relative_reference(at, bt), rel=1e-5)


def test_relative_change_of_nested_equal_nan_and_mismatched_outputs():
    a = {"logits": torch.tensor([3.0, 4.0]), "aux": torch.tensor([1.0, float("nan")])}
    b = {"logits": torch.tensor([3.0, 5.0]), "aux": torch.tensor([1.0, float("nan")])}
    differ, worst, rel = output_change(a, b)
    # the equal leaf still counts in ||a|| (its NaN as 0): 1 / sqrt(9 + 16 + 1)
    assert (differ, worst) == (True, 1.0) and rel == pytest.approx(1 / math.sqrt(26))
    assert output_change(a, {k: v.clone() for k, v in a.items()}) == (False, 0.0, 0.0)
    assert output_change(a, b, relative=False) == (True, 1.0, 0.0)
    huge = torch.tensor([3e38, 3e38])   # ||a|| overflows float32: the float64 sums
    assert output_change(huge, huge * 0.5)[2] == pytest.approx(0.5)
    assert output_change(torch.zeros(2), torch.ones(2))[2] == math.inf
    assert output_change({"x": torch.ones(2)}, {"y": torch.ones(2)})[:2] == (True, math.inf)
