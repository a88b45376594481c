"""``resid_pre.N`` / ``resid_post.N``: block N's input and output by name, for the families
whose blocks are known; patterns over them; ``resid_mid`` refused with what to capture."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from hookscope.core import Plan, PlanError, compare, load_model, parse_input
from hookscope.core.analyses import sweep
from hookscope.core.plan.path_patterns import expand_paths

pytest.importorskip("transformers", reason="the hf extra (transformers) is not installed")
import hf_models  # noqa: E402  (tests/core is on sys.path)

PROMPT = "the cat sat on the"
SOURCE = "the cat sat on a"


@pytest.fixture(scope="module")
def gpt2(tmp_path_factory):
    return load_model(f"hf:{hf_models.gpt2(tmp_path_factory.mktemp('resid') / 'gpt2')}")


@pytest.fixture(scope="module")
def llama(tmp_path_factory):
    return load_model(f"hf:{hf_models.llama(tmp_path_factory.mktemp('resid') / 'llama')}")


def test_resid_pre_grid_equals_the_hand_written_list_of_outputs(gpt2):
    """resid_pre.L is block L's input: the output of transformer.drop for L = 0 and of block
    L-1 after, the list a patching grid had to be written with by hand."""
    codec = gpt2.meaning.codec
    x = parse_input(f"text:{PROMPT}", gpt2.example_input, codec)
    tpl = {"{layer}": f"patch:text:{SOURCE}@pos={{pos}}"}
    metric = "logit-diff:' dog','cat'"
    named = sweep(gpt2.module, x, {"layer": "resid_pre.*", "pos": "all"}, tpl, metric,
                  meaning=gpt2.meaning, batch=False)
    by_hand = sweep(gpt2.module, x, {"layer": "transformer.drop,transformer.h.0", "pos": "all"},
                    tpl, metric, meaning=gpt2.meaning, batch=False)
    assert named.axes["layer"] == ["resid_pre.0", "resid_pre.1"]
    np.testing.assert_array_equal(named.values, by_hand.values)
    assert np.ptp(named.values) > 0
    est = sweep(gpt2.module, x, {"layer": "resid_pre.*", "pos": "all"}, tpl, metric,
                meaning=gpt2.meaning, estimate=True)
    assert np.isfinite(est.estimates).all()


def test_capture_by_name_is_the_block_input_and_output(gpt2, llama):
    for lm, blocks in ((gpt2, "transformer.h"), (llama, "model.layers")):
        x = lm.example_input
        got = []
        b1 = lm.module.get_submodule(f"{blocks}.1")
        h1 = b1.register_forward_pre_hook(lambda m, args: got.append(args[0].detach().clone()))
        try:
            r = compare(lm.module, x, Plan(capture=("resid_pre.1", "resid_post.1")))
        finally:
            h1.remove()
        assert set(r.captures) == {f"{blocks}.1:input", f"{blocks}.1"}
        assert torch.equal(r.captures[f"{blocks}.1:input"][0].tensor, got[0])
        assert expand_paths("resid_post.*", lm.module) == ["resid_post.0", "resid_post.1"]


def test_resid_mid_and_unknown_families_are_refused_with_what_to_use(gpt2):
    with pytest.raises(PlanError, match="ln_2:input"):
        Plan(capture=("resid_mid.0",)).resolve(gpt2.module)
    with pytest.raises(PlanError, match="resid_pre.0 .. resid_pre.1"):
        Plan(capture=("resid_pre.9",)).resolve(gpt2.module)
    cnn = load_model("demo:cnn")
    with pytest.raises(PlanError, match="BLOCK:input"):
        Plan(capture=("resid_pre.0",)).resolve(cnn.module)
