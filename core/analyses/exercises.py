"""The two exercises Hookscope grew from, computed with the core API.

Both return exactly the dictionaries of DESIGN.md. The numbers are whatever
torch computes on this machine; nothing is stored.
"""

from __future__ import annotations

from typing import Any

from ..demos.demo_models import clamp_demo, features_demo
from ..plan.plan import Plan
from ..engine.run import compare, run
from ..engine.output_diff import flat_floats

#: Exercise 1's layer and range.
CLAMP_LAYER = "0"
CLAMP_RANGE = (-0.5, 0.5)
#: Exercise 2's layers.
FEATURE_LAYERS = ("fc1", "fc2", "fc3")


def modify_hook_test() -> dict:
    """Exercise 1: clamp the first layer's output with a forward hook and compare outputs."""
    module, x = clamp_demo()
    result = compare(module, x, Plan(clamp={CLAMP_LAYER: CLAMP_RANGE}))
    return {
        "output_without": [round(v, 4) for v in flat_floats(result.output_without)],
        "output_with": [round(v, 4) for v in flat_floats(result.output_with)],
        "outputs_differ": bool(result.outputs_differ),
    }


def feature_extraction_test() -> dict:
    """Exercise 2: capture fc1, fc2 and fc3 in one forward pass."""
    module, x = features_demo()
    result = run(module, x, Plan(capture=list(FEATURE_LAYERS)))
    out: dict[str, Any] = {f"{name}_shape": list(result.captures[name][0].stats.shape)  # type: ignore[union-attr]  # run() summarises every capture
                           for name in FEATURE_LAYERS}
    out["num_features_captured"] = sum(1 for recs in result.captures.values() if recs)
    return out
