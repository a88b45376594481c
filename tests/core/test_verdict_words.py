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


@pytest.mark.parametrize("pos, from_end", [("-1", True), ("3", False), ("2:-1", True),
                                           ("0,4:6", False)])
def test_the_note_on_source_positions_names_minus_one_only_where_one_counts_from_the_end(
        pos, from_end):
    from hookscope.core import load_model, parse_input
    from hookscope.core.plan import parse_intervention

    lm = load_model("demo:lm")
    x = parse_input("text:the cat sat on the ", lm.example_input, lm.meaning.codec)
    plan = Plan(interventions={"blocks.0": parse_intervention(f"patch:text:the dog sat on the @pos={pos}")})
    text = output_verdict(compare(lm.module, x, plan, codec=lm.meaning.codec))
    assert f"@pos={pos} on blocks.0" in text
    assert ("-1 is each one's last token" in text) == from_end
    assert text.endswith("each one's last token." if from_end else "each on its own, from their first token.")


def test_the_largest_output_is_named_by_the_models_labels():
    """``labels=`` names the classes: the verdict says "#4 (e)", not a bare index."""
    from hookscope.core import Scale, Session

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 5))
    x = torch.tensor([[1.0, 2.0, 3.0]])
    labels = ["a", "b", "c", "d", "e"]
    s = Session.from_module(model, x, labels=labels)
    try:
        s.intervene("0", Scale(2.0))
        r = s.run(timeout_s=60)
    finally:
        s.close()
    top = int(r.output_without.argmax())
    assert int(r.output_with.argmax()) == top   # doubling keeps the order
    assert f"The largest output is still #{top} ({labels[top]})." in output_verdict(r)
