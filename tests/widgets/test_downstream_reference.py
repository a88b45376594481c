"""A captured layer downstream of an intervention shows its values without and with
the interventions, so the user sees what the edit did there; a layer the plan leaves alone is drawn once."""

from __future__ import annotations

import pytest
import torch

from hookscope.core import Plan, Zero, compare, load_model
from hookscope.core.engine.record_stats import reference_of
from hookscope.widgets.activation_panel import ActivationPanel


@pytest.fixture
def result():
    lm = load_model("demo:cnn")
    plan = Plan(capture=("conv1", "conv2", "fc"), interventions={"conv2": Zero(units=(0, 3, 5))})
    return compare(lm.module, lm.example_input, plan)


def test_reference_is_the_layers_own_before_or_the_run_without(result):
    conv1, conv2, fc = (result.captures[p][0] for p in ("conv1", "conv2", "fc"))
    t, s, label = reference_of(conv2)          # the intervened layer: before its own change
    assert label == "before" and torch.equal(t, conv2.pre_tensor)
    assert reference_of(conv1) == (None, None, "")   # upstream: nothing changed it
    t, s, label = reference_of(fc)             # downstream: the baseline run's values
    assert label == "without" and torch.equal(t, fc.baseline_tensor) and s is fc.baseline_stats
    assert not torch.equal(fc.baseline_tensor, fc.tensor)


def test_downstream_panel_draws_both_runs(qtbot, result):
    panel = ActivationPanel()
    qtbot.addWidget(panel)
    panel.resize(900, 900)
    panel.show_result(result)
    fc = panel.panels()[("fc", 0)]
    conv1 = panel.panels()[("conv1", 0)]
    assert "without the interventions: min" in fc.stats_label.text()
    assert "without" not in conv1.stats_label.text()
    conv2 = panel.panels()[("conv2", 0)]
    assert "zero changed" in conv2.stats_label.text()
    # the light series of fc's histogram is the run without the interventions
    fc.histogram.draw(fc.record)
    assert fc.histogram.hist_pre.isVisible()
    conv1.histogram.draw(conv1.record)
    assert not conv1.histogram.hist_pre.isVisible()
