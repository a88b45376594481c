"""The verdict names the first interventions and counts the rest, never drops them silently."""

from __future__ import annotations

from hookscope.core import Plan, compare, load_model
from hookscope.core.engine.verdict import output_verdict

LAYERS = ("conv1", "bn1", "conv2", "bn2", "fc", "relu1")


def test_a_plan_of_six_interventions_names_three_and_says_how_many_more():
    lm = load_model("demo:cnn")
    plan = Plan(clamp={p: (-0.1, 0.1) for p in LAYERS})
    r = compare(lm.module, lm.example_input, plan)
    assert r.outputs_differ
    text = output_verdict(r)
    named = [p for p in LAYERS if f"on {p}" in text]
    assert len(named) == 3 and "and 3 more" in text


def test_unchanged_output_counts_the_rest_too():
    # clamps far wider than any value: nothing changes, every clamp is captured
    lm = load_model("demo:cnn")
    plan = Plan(capture=LAYERS, clamp={p: (-1e9, 1e9) for p in LAYERS})
    r = compare(lm.module, lm.example_input, plan)
    assert not r.outputs_differ
    text = output_verdict(r)
    assert "changed no value" in text and "and 3 more" in text


def test_three_or_fewer_are_all_named_and_nothing_is_counted():
    lm = load_model("demo:cnn")
    r = compare(lm.module, lm.example_input, Plan(clamp={p: (-0.1, 0.1) for p in LAYERS[:3]}))
    text = output_verdict(r)
    assert all(f"on {p}" in text for p in LAYERS[:3]) and "more" not in text
