"""A new input shape of a model already run takes no first-run path: ``compare()`` on a
prompt of another length (another batch size) runs its two forwards, as a steady call
does, with the same hooks and the same Python work, and its captures are right
(an in-place op that overwrites a captured layer is still caught)."""

import cProfile
import pstats

import pytest
import torch

from hookscope.core import Clamp, Plan, compare, load_model


def forwards_and_calls(module, x, plan):
    """How many times the model's forward ran in one compare(), and the Python calls it made."""
    ran = []
    h = module.register_forward_pre_hook(lambda _m, _a: ran.append(1))
    prof = cProfile.Profile()
    try:
        prof.enable()
        res = compare(module, x, plan)
        prof.disable()
    finally:
        h.remove()
    return len(ran), pstats.Stats(prof).total_calls, res


def _lm():
    lm = load_model("demo:lm")
    plan = Plan(capture=("blocks.0", "blocks.1.mlp")).with_intervention("blocks.0", Clamp(-0.5, 0.5))
    return lm.module, (lambda n: torch.randint(0, 30, (1, n), generator=torch.Generator().manual_seed(n))), plan


def _cnn():
    cnn = load_model("demo:cnn")
    # bn1's output is overwritten by relu1 (in place): a victim the first run learns.
    plan = Plan(capture=("bn1", "conv2", "fc")).with_intervention("conv2", Clamp(-0.2, 0.2))
    return cnn.module, (lambda n: torch.randn(n, 1, 8, 8, generator=torch.Generator().manual_seed(n))), plan


@pytest.mark.parametrize("make", [_lm, _cnn], ids=["demo:lm lengths", "demo:cnn batch sizes"])
def test_a_new_shape_runs_like_a_steady_call(make):
    module, inputs, plan = make()
    compare(module, inputs(3), plan)  # the model's first run: it learns its in-place victims
    for n in (4, 7, 11):
        x = inputs(n)
        new_forwards, new_calls, res = forwards_and_calls(module, x, plan)
        steady_forwards, steady_calls, _ = forwards_and_calls(module, x, plan)
        assert new_forwards == steady_forwards == 2  # baseline + intervened, no re-run
        assert new_calls == steady_calls
        assert res.recaptured == ()
        # The captures are the values a hand-written hook sees, in-place victims included.
        for path in plan.capture:
            got = []
            h = module.get_submodule(path).register_forward_hook(
                lambda _m, _i, out: got.append(out.detach().clone()))
            try:
                with torch.no_grad():
                    module(x)
            finally:
                h.remove()
            assert torch.equal(res.captures[path][0].baseline_tensor, got[0]), path
