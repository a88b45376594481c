"""Layer path patterns (h.*.mlp, layer*.0.conv1, **) expand to the model's own paths."""

import pytest
import torch
from torch import nn

from hookscope.core import Plan, PlanError, compare, load_model
from hookscope.core.plan.path_patterns import expand_paths, expand_plan, matches


def resnet_like():
    block = lambda: nn.Sequential(nn.Conv2d(2, 2, 1), nn.ReLU())
    layers = {f"layer{i}": nn.Sequential(nn.ModuleDict({"conv1": nn.Conv2d(2, 2, 1)}), block())
              for i in range(1, 4)}
    return nn.ModuleDict(layers)


def test_star_stays_within_one_name_and_double_star_spans_any():
    m = resnet_like()
    every = [p for p, _ in m.named_modules() if p]
    assert expand_paths("layer*.0.conv1", m) == [p for p in every
                                                if p.startswith("layer") and p.endswith(".0.conv1")]
    assert expand_paths("layer*.0.conv1", m) == ["layer1.0.conv1", "layer2.0.conv1", "layer3.0.conv1"]
    assert expand_paths("layer?.1.*", m) == [p for p in every if p.count(".") == 2 and ".1." in p]
    assert not matches("layer*", "layer1.0")
    assert expand_paths("**.conv1", m) == [p for p in every if p.endswith("conv1")]
    assert expand_paths("layer2", m) == ["layer2"]  # plain paths pass through


def test_a_pattern_that_matches_nothing_says_how_patterns_read():
    with pytest.raises(PlanError, match="matches no layer.*'\\*' stands for one name"):
        expand_paths("h.*.mlp", resnet_like())


def test_a_pattern_that_fits_below_the_root_names_the_rooted_one():
    # Hugging Face's GPT-2 keeps its blocks at transformer.h.N: 'h.*.mlp' names them
    # from one level down; the error gives the pattern that matches from the root.
    model = nn.ModuleDict({"transformer": nn.ModuleDict({"h": nn.ModuleList(
        [nn.ModuleDict({"mlp": nn.Linear(2, 2)}) for _ in range(2)])})})
    with pytest.raises(PlanError, match="'transformer.h.\\*.mlp' does"):
        expand_paths("h.*.mlp", model)
    assert expand_paths("transformer.h.*.mlp", model) == ["transformer.h.0.mlp", "transformer.h.1.mlp"]


def test_plan_with_patterns_captures_and_clamps_every_match():
    lm = load_model("demo:lm")
    plan = expand_plan(Plan(capture=["blocks.*.attn.probs"], clamp={"blocks.*.mlp": (-0.1, 0.1),
                                                                     "blocks.1.mlp": (-1, 1)}),
                       lm.module)
    assert plan.capture == ("blocks.0.attn.probs", "blocks.1.attn.probs")
    assert plan.clamp == {"blocks.0.mlp": (-0.1, 0.1), "blocks.1.mlp": (-1.0, 1.0)}
    r = compare(lm.module, lm.example_input, plan)
    assert set(r.captures) == {"blocks.0.attn.probs", "blocks.1.attn.probs"}
    by_hand = compare(lm.module, lm.example_input,
                      Plan(clamp={"blocks.0.mlp": (-0.1, 0.1), "blocks.1.mlp": (-1, 1)}))
    assert torch.equal(r.output_with, by_hand.output_with)


def test_cli_capture_takes_a_wildcard(capsys):
    from hookscope.app.cli import main

    assert main(["run", "demo:lm", "--capture", "blocks.*.mlp", "--stats-only"]) == 0
    out = capsys.readouterr().out
    assert "blocks.0.mlp" in out and "blocks.1.mlp" in out
