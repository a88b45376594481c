"""Model A's BatchNorm victims computed again from their input when B compares them
(core/analyses/model_diff_remake.py): the rows are those of hand-hooked models whose hooks
clone every output, and whatever the remake cannot see is copied instead."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

from hookscope.core import Plan, diff
from hookscope.core.analyses.model_diff_pass import run_a
from hookscope.core.analyses.model_diff_remake import Remade
from hookscope.core.model.learned import memory_for

from fast_marks import fast_only  # tests/core is on sys.path
from tests.support.hand_hooks import hooked_outputs

PATHS = ["conv", "bn", "relu", "conv2", "bn2", "relu2"]


class Block(nn.Module):
    """conv -> bn -> ReLU(inplace) twice, a residual add in place on bn2's output;
    ``scribble``: the forward then doubles conv's output in place (bn's input)."""

    def __init__(self, scribble: bool = False):
        super().__init__()
        self.conv, self.bn, self.relu = nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(True)
        self.conv2, self.bn2, self.relu2 = nn.Conv2d(8, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(True)
        self.scribble = scribble

    def forward(self, x):
        y = self.conv(x)
        h = self.relu(self.bn(y))
        out = self.bn2(self.conv2(h))
        out += h
        if self.scribble:
            y.mul_(2)  # after bn read it: bn's input is no longer what bn saw
        return self.relu2(out)


def _models(seed: int = 0, scribble: bool = False):
    torch.manual_seed(seed)
    a = Block(scribble)
    for bn in (a.bn, a.bn2):  # statistics of their own, so the remake has something to get wrong
        bn.running_mean.uniform_(-0.5, 0.5)
        bn.running_var.uniform_(0.5, 2.0)
        nn.init.uniform_(bn.weight, 0.5, 1.5)
        nn.init.uniform_(bn.bias, -0.2, 0.2)
    a.eval()
    b = copy.deepcopy(a)
    with torch.no_grad():
        b.conv2.weight.add_(0.05 * torch.randn(b.conv2.weight.shape))
    return a, b, torch.randn(2, 3, 6, 6)


def _check_against_clones(got, a, b, x):
    want_a, want_b = hooked_outputs(a, x, PATHS), hooked_outputs(b, x, PATHS)
    assert [r.path for r in got.layers] == PATHS
    for r in got.layers:
        wa, wb = want_a[r.path], want_b[r.path]
        assert r.max_abs_diff == float((wb - wa).abs().max()), r
        rel = float((wb.double() - wa.double()).norm() / wa.double().norm())
        assert r.relative_change == pytest.approx(rel, rel=1e-5, abs=1e-12), r


@fast_only
def test_batchnorm_victims_are_remade_not_copied_and_rows_equal_cloned_hooks():
    a, b, x = _models()
    got = diff(a, b, x)  # learns the victims (bn, bn2), then runs A again
    assert memory_for(a).victims == {"bn", "bn2"} and not memory_for(a).no_remake
    _check_against_clones(got, a, b, x)
    assert got.layers[0].max_abs_diff == 0.0 and got.layers[1].max_abs_diff == 0.0  # before conv2
    _check_against_clones(diff(a, b, x), a, b, x)  # the learned run, remaking from the start
    _, keeper = run_a(a, x, Plan(), torch.device("cpu"), None, None, None)
    kinds = {p: type(leaves[0][0]) for (p, _), leaves in keeper.kept.items()}
    assert kinds["bn"] is Remade and kinds["bn2"] is Remade and kinds["conv"] is torch.Tensor


@fast_only
def test_an_input_changed_in_place_after_the_layer_makes_it_copied():
    a, b, x = _models(scribble=True)
    got = diff(a, b, x)
    _check_against_clones(got, a, b, x)
    # conv's output was doubled after bn read it: conv is a victim, bn cannot be remade
    assert {"conv", "bn"} <= memory_for(a).victims and "bn" in memory_for(a).no_remake
    _check_against_clones(diff(a, b, x), a, b, x)


def test_an_intervention_on_the_layer_is_copied_and_applies_to_both():
    a, b, x = _models()
    plan = Plan(clamp={"bn": (-0.1, 0.1)})
    got = diff(a, b, x, plan=plan)
    _, keeper = run_a(a, x, plan, torch.device("cpu"), None, None, None)
    assert all(type(t) is torch.Tensor for t, _ in keeper.kept[("bn", 0)])
    bn = next(r for r in got.layers if r.path == "bn")
    assert bn.max_abs_diff == 0.0  # the same clamped values in both (conv2 comes after)
    assert got.first_divergent is not None and got.first_divergent.path == "conv2"


def test_the_reference_path_copies_every_victim(monkeypatch):
    monkeypatch.setenv("HOOKSCOPE_FAST", "0")
    a, b, x = _models(seed=3)
    got = diff(a, b, x)
    _check_against_clones(got, a, b, x)
    _, keeper = run_a(a, x, Plan(), torch.device("cpu"), None, None, None)
    assert not any(type(t) is Remade for leaves in keeper.kept.values() for t, _ in leaves)


@fast_only
def test_under_autocast_the_rows_are_the_reference_paths(monkeypatch):
    # bfloat16 convolutions under CPU autocast: a remade layer (or a copied one, where its
    # output's dtype is not its input's) gives the values the reference path's copies give
    a, b, x = _models(seed=5)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        diff(a, b, x)  # learns the victims
        got = diff(a, b, x)
        monkeypatch.setenv("HOOKSCOPE_FAST", "0")
        want = diff(a, b, x)
    assert [r.path for r in got.layers] == [r.path for r in want.layers] == PATHS
    for g, w in zip(got.layers, want.layers):
        assert g.max_abs_diff == w.max_abs_diff, g
        assert g.relative_change == pytest.approx(w.relative_change, rel=1e-5, abs=1e-12), g
