"""A sweep on a small Hugging Face GPT-2 (config saved here, tokenizer trained here):
every cell equals its single compare(), with one shared baseline and source forward."""

import pytest

from hookscope.core import Plan, compare, load_model, parse_input
from hookscope.core.analyses.sweep import sweep
from hookscope.core.analyses.sweep_metrics import make_metric
from hookscope.core.plan import parse_intervention

pytest.importorskip("transformers", reason="the hf extra (transformers) is not installed")
import hf_models  # noqa: E402  (tests/core is on sys.path)


@pytest.fixture(scope="module")
def gpt2(tmp_path_factory):
    return load_model(f"hf:{hf_models.gpt2(tmp_path_factory.mktemp('sweep_hf') / 'gpt2')}")


def test_gpt2_layers_by_positions_patching_grid(gpt2):
    codec = gpt2.meaning.codec
    x = parse_input("text:the cat sat on the", gpt2.example_input, codec)
    source = "text:the cat sat on a"  # the same number of tokens
    assert len(codec.encode(" dog")) == 1 and len(codec.encode("cat")) == 1
    metric = "logit-diff:' dog','cat'"  # one token each in the tokenizer trained here
    calls = [0]
    h = gpt2.module.register_forward_pre_hook(lambda m, a, k=None: calls.__setitem__(0, calls[0] + 1))
    try:
        res = sweep(gpt2.module, x, {"layer": "transformer.h.*", "pos": "all"},
                    {"{layer}": f"patch:{source}@pos={{pos}}"}, metric, meaning=gpt2.meaning,
                    batch=False)
    finally:
        h.remove()
    n_pos = len(codec.encode("the cat sat on the"))
    assert res.values.shape == (2, n_pos)
    assert res.axes["layer"] == ["transformer.h.0", "transformer.h.1"]
    assert calls[0] == res.values.size + 2
    m = make_metric(metric, gpt2.meaning)
    for i, layer in enumerate(res.axes["layer"]):
        for p in range(n_pos):
            iv = parse_intervention(f"patch:{source}@pos={p}")
            r = compare(gpt2.module, x, Plan(interventions={layer: iv}, keep_tensors=False),
                        codec=codec)
            assert res.values[i, p] == m.cell(r.output_without, r.output_with)
    assert res.baseline == m.clean(r.output_without)
    assert (res.values != res.baseline).any()


def test_gpt2_mlp_units_zero_ablation_and_scale_curve(gpt2):
    x = parse_input("text:the cat sat on the", gpt2.example_input, gpt2.meaning.codec)
    res = sweep(gpt2.module, x, {"layer": "transformer.h.*.mlp", "unit": "0:3"},
                {"{layer}": "zero@units={unit}"}, "kl", meaning=gpt2.meaning, batch=False)
    curve = sweep(gpt2.module, x, {"f": "logspace(-1,1,3)"}, {"transformer.h.1.mlp": "scale:{f}"},
                  "top-changed", meaning=gpt2.meaning, batch=False)
    for i, layer in enumerate(res.axes["layer"]):
        for u in range(3):
            r = compare(gpt2.module, x, Plan(interventions={layer: parse_intervention(
                f"zero@units={u}")}, keep_tensors=False), codec=gpt2.meaning.codec)
            assert res.values[i, u] == make_metric("kl", gpt2.meaning).cell(r.output_without,
                                                                           r.output_with)
    assert (res.values > 0).all()
    for k, f in enumerate(curve.coords["f"]):
        r = compare(gpt2.module, x, Plan(interventions={"transformer.h.1.mlp": parse_intervention(
            f"scale:{f!r}")}))
        want = float(r.output_without.logits[0, -1].argmax() != r.output_with.logits[0, -1].argmax())
        assert curve.values[k] == want
