"""What the window shows first for each built-in demo: a starting plan and a short note.

Used only when the command line names a demo and sets no ``--capture`` /
``--clamp`` of its own, so that every demo opens with something to look at.
``demo:clamp`` opens as exercise 1: layer ``0`` captured and clamped to
[-0.5, 0.5].
"""

from __future__ import annotations

import dataclasses

from hookscope.core import Plan
from hookscope.core.demos import DEMO_DESCRIPTIONS

EXERCISE_1 = Plan(capture=("0",), clamp={"0": (-0.5, 0.5)})

DEFAULT_PLANS: dict[str, Plan] = {
    "clamp": EXERCISE_1,
    "features": Plan(capture=("fc1", "fc2", "fc3")),
    "cnn": Plan(capture=("conv1", "relu1", "conv2", "fc")),
    "transformer": Plan(capture=("embed", "encoder.layers.0.self_attn", "encoder.layers.1.linear1",
                                 "head")),
    "lm": Plan(capture=("blocks.0.attn.probs", "blocks.1.attn.probs", "blocks.1.mlp")),
    "detector": Plan(capture=("backbone.conv1", "probs"), clamp={"backbone.conv1": (-1.0, 0.6)}),
}

NOTES: dict[str, str] = {
    "clamp": ("<b>Exercise 1 — modify activations with a forward hook.</b> A forward hook on "
              "layer <code>0</code> returns <code>output.clamp(-0.5, 0.5)</code>. "
              "Centre: layer 0's values before and after the clamp. Right: the model's output "
              "without the hook and with it. Drag a bound line or edit the clamp cells in the "
              "layer tree, then Run (or switch on Live)."),
    "features": ("<b>Exercise 2 — feature extraction with hooks.</b> Hooks on fc1, fc2 and fc3 "
                 "capture all three outputs in one forward pass (shapes [1, 8], [1, 4], [1, 2]); "
                 "tick or untick layers in the tree to change what is captured."),
    "cnn": ("<b>Digits CNN.</b> " + DEMO_DESCRIPTIONS.get("cnn", "") + " Set a clamp on conv1 "
            "and drag its bounds in Live mode to watch the feature maps and the class scores move."),
    "transformer": ("<b>Tiny transformer.</b> " + DEMO_DESCRIPTIONS.get("transformer", "")
                    + " Each captured layer shows a heat map per token."),
    # the description's own "Type text:..." hint is said once, here, with an example
    "lm": ("<b>Tiny language model.</b> " + DEMO_DESCRIPTIONS.get("lm", "").split(" Type ")[0]
           + " Type <code>text:the dog sat on the </code> as input: the table under the output "
           "lists each position's next characters without and with the interventions; to change "
           "them, set a clamp on <code>blocks.1.mlp</code> (its Low/High cells) or choose "
           "another intervention."),
    "detector": ("<b>Tiny detector.</b> " + DEMO_DESCRIPTIONS.get("detector", "") + " The "
                 "picture under the output shows the boxes without (solid blue) and with the "
                 "intervention (dashed orange); set the score threshold beside its legend."),
}


def demo_name(spec: str) -> str | None:
    spec = spec.strip()
    return spec.removeprefix("demo:") if spec.startswith("demo:") else None


def default_plan(spec: str) -> Plan | None:
    name = demo_name(spec)
    return DEFAULT_PLANS.get(name) if name else None


def with_default_captures(plan: Plan, spec: str) -> Plan:
    """``plan`` as the window opens it: a command line that only intervenes
    (``--clamp`` with no ``--capture``) still shows something at once: the
    demo's default captures, and every intervened layer (drawn before | after)."""
    if plan.capture or not plan.interventions:
        return plan
    demo = default_plan(spec)
    capture = [*(demo.capture if demo is not None else ()), *plan.interventions]
    return dataclasses.replace(plan, capture=tuple(dict.fromkeys(capture)))


def note_for(spec: str, description: str = "") -> str:
    """Rich text for the note above the plots ('' for none)."""
    name = demo_name(spec)
    if name and name in NOTES:
        return NOTES[name]
    return f"<b>{spec}</b> — {description}" if description else ""
