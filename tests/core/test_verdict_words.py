"""The verdict when the outputs differ although the plan changed nothing."""

import pytest
import torch
from torch import nn

from hookscope.core import Plan, compare
from hookscope.core.engine.verdict import output_verdict


class SelfChanging(nn.Module):
    """Adds one to its own weight on every forward (a model that learns as it runs)."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(3, 2)

    def forward(self, x):
        out = self.lin(x)
        with torch.no_grad():
            self.lin.weight.add_(1.0)
        return out


@pytest.mark.parametrize("plan", [Plan(capture=("lin",)), Plan()])
def test_a_model_that_changes_itself_is_named_not_the_empty_intervention(plan):
    torch.manual_seed(0)
    r = compare(SelfChanging(), torch.ones(1, 3), plan, "cpu")
    assert r.outputs_differ
    text = output_verdict(r)
    assert "the model changed between the two forwards" in text
    assert "intervention (" not in text and "()" not in text
    assert f"{r.max_abs_diff:.4g}" in text
