"""Sweep metrics: normalised between the clean and the source run as patching papers do, and
a detector's box count and top score, each equal to what its single compare() gives."""

import numpy as np
import pytest
import torch

from hookscope.core import Plan, compare, load_model, parse_input
from hookscope.core.base.errors import PlanError
from hookscope.core.analyses.sweep import sweep
from hookscope.core.analyses.sweep_metrics import METRICS, make_metric, normalised
from hookscope.core.plan import parse_intervention
from hookscope.core.views.detections import image_boxes

PROMPT = "text:the cat sat on the "
SOURCE = "text:the dog sat on the "


@pytest.fixture(scope="module")
def lm():
    return load_model("demo:lm")


def test_normalised_patching_grid_is_zero_at_clean_and_one_at_source(lm):
    codec = lm.meaning.codec
    x = parse_input(PROMPT, lm.example_input, codec)
    src = parse_input(SOURCE, lm.example_input, codec)
    metric = "logit-diff:' ',t"
    m = make_metric(metric, lm.meaning)
    with torch.inference_mode():
        m_clean = m.clean(lm.module(x))
        m_source = m.clean(lm.module(src))
    assert m_clean != m_source
    res = sweep(lm.module, x, {"layer": "blocks.*", "pos": "all"},
                {"{layer}": f"patch:{SOURCE}@pos={{pos}}"}, metric, meaning=lm.meaning,
                normalise=True)
    assert res.normalised == pytest.approx({"clean": m_clean, "source": m_source})
    raw = sweep(lm.module, x, {"layer": "blocks.*", "pos": "all"},
                {"{layer}": f"patch:{SOURCE}@pos={{pos}}"}, metric, meaning=lm.meaning)
    np.testing.assert_allclose(res.raw_values, raw.values, rtol=0, atol=0)
    np.testing.assert_allclose(res.values, (raw.values - m_clean) / (m_source - m_clean))
    # positions where the prompts agree patch nothing in: 0; the whole last position of the
    # last block carries the source's prediction: 1
    same = [i for i in range(x.shape[-1]) if x[0, i] == src[0, i]]
    assert np.all(res.values[0, same[:3]] == 0.0)
    assert res.values[-1, -1] == pytest.approx(1.0, abs=1e-12)
    d = res.to_json_dict()
    assert d["normalised"] == res.normalised and d["values"] == res.values.tolist()


def test_normalised_difference_metric_divides_by_the_source_runs_distance(lm):
    x = parse_input(PROMPT, lm.example_input, lm.meaning.codec)
    src = parse_input(SOURCE, lm.example_input, lm.meaning.codec)
    res = sweep(lm.module, x, {"layer": "blocks.*"}, {"{layer}": f"patch:{SOURCE}"}, "kl",
                meaning=lm.meaning, normalise=True, batch=False)
    kl = make_metric("kl", lm.meaning)
    with torch.inference_mode():
        to_source = kl.cell(lm.module(x), lm.module(src))
    assert res.normalised["clean"] == 0.0
    assert res.normalised["source"] == pytest.approx(to_source, rel=1e-12)
    # the whole output of a block patched from the source run is the source run from there on
    np.testing.assert_allclose(res.values, [1.0, 1.0], rtol=1e-9)


def test_normalise_needs_one_source_input(lm):
    x = parse_input(PROMPT, lm.example_input, lm.meaning.codec)
    with pytest.raises(PlanError, match="exactly one source input"):
        sweep(lm.module, x, {"pos": "0:2"}, {"blocks.0": "zero@pos={pos}"}, "kl",
              meaning=lm.meaning, normalise=True)
    assert np.isnan(normalised(np.array([1.0, 2.0]), 3.0, 3.0)).all()


def test_detector_box_count_and_top_score_along_a_strength_curve():
    det = load_model("demo:detector")
    x = det.example_input
    over, tpl = {"f": "linspace(0,1,5)"}, {"backbone.conv1": "scale:{f}"}
    count = sweep(det.module, x, over, tpl, "box-count", meaning=det.meaning)
    top = sweep(det.module, x, over, tpl, "top-score", meaning=det.meaning)
    red = sweep(det.module, x, over, tpl, "top-score:red", meaning=det.meaning)
    # a detector's output is a list per image, not a batch along dim 0: it runs one by one
    assert count.batched == 0 and "not batched along dim 0" in count.batch["note"]
    for k, f in enumerate(count.coords["f"]):
        r = compare(det.module, x, Plan(interventions={"backbone.conv1": parse_intervention(
            f"scale:{f!r}")}))
        boxes = image_boxes(r.output_with, det.meaning)
        assert count.values[k] == sum(1 for b in boxes if b["score"] >= 0.5)
        assert top.values[k] == pytest.approx(max((b["score"] for b in boxes), default=0.0))
        reds = [b["score"] for b in boxes if b["label"] == "red"]
        assert red.values[k] == pytest.approx(max(reds, default=0.0))
    base = image_boxes(compare(det.module, x).output_without, det.meaning)
    assert count.baseline == sum(1 for b in base if b["score"] >= 0.5) > 0
    assert count.values[0] == 0 and count.values[-1] == count.baseline


def test_metric_list_and_refusals():
    assert {"box-count[:MIN_SCORE]", "top-score[:LABEL]", "kl", "max-abs-diff"} <= set(METRICS)
    cnn = load_model("demo:cnn")
    with pytest.raises(PlanError, match="detector's output"):
        sweep(cnn.module, cnn.example_input, {"u": "0:2"}, {"conv1": "zero@units={u}"},
              "box-count", meaning=cnn.meaning)
    with pytest.raises(PlanError, match="box-count:0.3"):
        make_metric("box-count:lots", None)
    with pytest.raises(PlanError, match="finite"):
        make_metric("box-count:nan", None)
