"""A sweep reports its grid as it fills in: after each cell, a copy of the grid so far
(cells not run yet NaN), its axes labelled, the last one equal to the result."""

from __future__ import annotations

import numpy as np
import pytest

from hookscope.core import load_model
from hookscope.core.analyses.sweep import sweep


@pytest.fixture(scope="module")
def cnn():
    return load_model("demo:cnn")


def test_each_cell_arrives_with_the_grid_so_far(cnn):
    seen = []
    res = sweep(cnn.module, cnn.example_input, {"layer": "conv1,conv2", "unit": "0:3"},
                {"{layer}": "zero@units={unit}"}, "prob:#3", meaning=cnn.meaning,
                partial=seen.append)
    assert len(seen) == res.cells == 6
    for k, got in enumerate(seen):
        assert got.axes == res.axes and got.metric == res.metric
        flat = got.values.reshape(-1)
        assert np.array_equal(flat[:k + 1], res.values.reshape(-1)[:k + 1])
        assert np.isnan(flat[k + 1:]).all()
    assert seen[0].values is not seen[1].values  # a copy: the caller may keep it
    # a partial grid already re-runs its cells
    cell = seen[1].run_cell(layer="conv1", unit=1)
    assert cell.plan is not None and "conv1" in cell.plan.interventions


def test_a_failing_callback_stops_the_sweep(cnn):
    def boom(_r):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        sweep(cnn.module, cnn.example_input, {"f": "linspace(0,1,4)"}, {"conv2": "scale:{f}"},
              partial=boom)
    for m in cnn.module.modules():
        assert not m._forward_hooks and not m._forward_pre_hooks
