"""Sweeps over input sets: each cell is the mean over the inputs of what the single-input
sweep gives, with its spread and every input's value; positions are counted per input."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from hookscope.core import Add, At, load_model, parse_input
from hookscope.core.base.errors import PlanError
from hookscope.core.analyses import sweep

SAME = ["the cat sat on", "a dog ran to a", "my hat is blue", "one ox at rest"]   # 14 chars
MIXED = ["the cat sat on the ", "a dog", "the quick brown fox jumps", "hi there"]
OVER = {"layer": "blocks.*", "alpha": "linspace(0,4,3)"}


@pytest.fixture(scope="module")
def lm():
    return load_model("demo:lm")


def _xs(lm, texts):
    return [parse_input("text:" + t, lm.example_input, lm.meaning.codec) for t in texts]


def _vector(lm):
    return torch.randn(lm.module.head.in_features, generator=torch.Generator().manual_seed(3))


def _tpl(v, pos=None):
    if pos is None:
        return {"{layer}": lambda alpha: Add(v, alpha)}
    return {"{layer}": lambda alpha: Add(v, alpha, at=At(positions=[pos]))}


def test_unbatched_cells_are_the_mean_of_single_sweeps_bit_for_bit(lm):
    xs = _xs(lm, MIXED)
    tpl = _tpl(_vector(lm))
    res = sweep(lm.module, None, OVER, tpl, "logit:e", meaning=lm.meaning, input_set=xs,
                batch=False)
    singles = np.stack([sweep(lm.module, x, OVER, tpl, "logit:e", meaning=lm.meaning,
                              batch=False).values for x in xs])
    assert np.array_equal(res.per_input, singles)   # the same computation, cell by cell
    assert np.array_equal(res.values, singles.mean(axis=0))
    assert np.array_equal(res.spread, singles.std(axis=0))
    assert res.per_input.shape == (len(xs), 2, 3) and res.inputs == ["0", "1", "2", "3"]
    assert not np.allclose(res.spread, 0)   # the inputs do differ
    with pytest.raises(PlanError, match="mean over an input set"):
        res.run_cell(layer="blocks.0", alpha=0.0)   # a cell of a set is many runs


def test_inputs_of_one_shape_share_batched_forwards_and_agree_with_single_runs(lm):
    xs = _xs(lm, SAME)
    tpl = _tpl(_vector(lm))
    res = sweep(lm.module, None, OVER, tpl, "logit:e", meaning=lm.meaning, input_set=xs,
                input_names=SAME)
    singles = np.stack([sweep(lm.module, x, OVER, tpl, "logit:e", meaning=lm.meaning,
                              batch=False).values for x in xs])
    # rows of a batched forward round as a batched matrix product does: a stated tolerance
    np.testing.assert_allclose(res.per_input, singles, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(res.values, singles.mean(axis=0), rtol=1e-5, atol=1e-5)
    assert res.batch["cells"] == len(xs) * 6
    # one baseline of its own, the other three as rows of one forward; every cell of every
    # input in one more forward
    assert res.forwards["baseline"] == 2 and res.batch["forwards"] == 1
    assert res.inputs == SAME


def test_last_position_is_each_inputs_own_against_a_hand_written_hook(lm):
    xs = _xs(lm, MIXED)
    v = _vector(lm)
    res = sweep(lm.module, None, {"layer": "blocks.0,blocks.1", "alpha": "0,2.5"},
                _tpl(v, -1), "logit:e", meaning=lm.meaning, input_set=xs)
    e = lm.meaning.codec.encode("e")[0]
    for i, x in enumerate(xs):
        for li, layer in enumerate(("blocks.0", "blocks.1")):
            def hook(module, args, out):
                out = out.clone()
                out[:, -1] += 2.5 * v
                return out
            h = lm.module.get_submodule(layer).register_forward_hook(hook)
            try:
                with torch.no_grad():
                    want = float(lm.module(x)[0, -1, e])
            finally:
                h.remove()
            assert res.per_input[i, li, 1] == pytest.approx(want, rel=1e-5, abs=1e-5)
    assert len({x.shape[1] for x in xs}) == len(xs)   # four lengths, none padded


def test_estimates_per_input_averaged_equal_single_estimates(lm):
    xs = _xs(lm, MIXED)
    tpl = _tpl(_vector(lm))
    res = sweep(lm.module, None, OVER, tpl, "logit:e", meaning=lm.meaning, input_set=xs,
                estimate=True, verify=2)
    singles = [sweep(lm.module, x, OVER, tpl, "logit:e", meaning=lm.meaning, estimate=True)
               for x in xs]
    est = np.stack([s.estimates for s in singles])
    assert np.array_equal(res.estimates_per_input, est)   # one input each: the same path
    assert np.array_equal(res.estimates, est.mean(axis=0))
    # the verified cells are those the mean estimate moves most, run on every input
    cells = [tuple(c) for c in res.verified["cells"]]
    assert len(cells) == 2
    exact = np.stack([sweep(lm.module, x, OVER, tpl, "logit:e", meaning=lm.meaning,
                            batch=False).values for x in xs]).mean(axis=0)
    for c, got in zip(cells, res.verified["values"]):
        assert got == pytest.approx(float(exact[c]), rel=1e-5, abs=1e-5)


def test_a_grid_that_differs_between_inputs_is_refused_naming_the_input(lm):
    xs = _xs(lm, MIXED)
    with pytest.raises(PlanError, match=r"input 1 \(a dog\) gives a different grid"):
        sweep(lm.module, None, {"pos": "all"}, {"blocks.0": "zero@pos={pos}"}, "logit:e",
              meaning=lm.meaning, input_set=xs, input_names=MIXED)


def test_session_sweeps_over_an_input_file(lm, tmp_path):
    from hookscope.core import Session

    f = tmp_path / "prompts.txt"
    f.write_text("\n".join(MIXED) + "\n")
    s = Session.load("demo:lm", input_text="text:the cat")
    try:
        res = s.sweep({"layer": "blocks.*"}, {"{layer}": "zero@pos=-1"}, "logit:e",
                      inputs=str(f), batch=False)
    finally:
        s.close()
    xs = _xs(lm, MIXED)
    singles = np.stack([sweep(lm.module, x, {"layer": "blocks.*"}, {"{layer}": "zero@pos=-1"},
                              "logit:e", meaning=lm.meaning, batch=False).values for x in xs])
    np.testing.assert_allclose(res.per_input, singles, rtol=1e-6, atol=1e-6)
    assert res.inputs == MIXED
