"""Scans over input sets equal brute force: every input alone through the model, its
activations held at once, sorted and counted in one go.

The digits case: the 200 images of demo:cnn's own test split give per-class accuracy
without and with a zeroed conv channel, and the top 9 inputs of a channel, each as
single compare() runs give them."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import torch

from hookscope.core import Cancelled, Plan, Zero, compare, load_model
from hookscope.core.base.call_args import call_model
from hookscope.core.analyses import ScanRequest, merge, scan, scan_shard, shards, finish
from hookscope.core.dataset import open_inputs

DIGITS = Path(__file__).resolve().parents[2] / "resources" / "digits_test.safetensors"


def brute(lm, inputs, layer: str, unit_dim_last: bool):
    """Per input alone: the layer's output (hooked by hand) and the model's output."""
    module = dict(lm.module.named_modules())[layer]
    acts, outs = [], []
    for i in range(len(inputs)):
        got = []
        h = module.register_forward_hook(lambda m, a, o: got.append(o[0] if isinstance(o, tuple)
                                                                    else o))
        try:
            with torch.inference_mode():
                outs.append(call_model(lm.module, inputs.item(i, lm.example_input,
                                                              lm.meaning.codec)))
        finally:
            h.remove()
        acts.append(got[0].detach())
    return acts, outs


def per_unit_max(act: torch.Tensor, unit_dim: int) -> tuple[torch.Tensor, torch.Tensor]:
    a = act.movedim(unit_dim, -1)
    a = a.reshape(-1, a.shape[-1])
    return a.max(0).values, a.max(0).indices


def expected_top(acts, unit_dim: int, unit: int, k: int):
    vals = [per_unit_max(a, unit_dim) for a in acts]
    v = torch.stack([x[0][unit] for x in vals]).double()
    pos = [int(x[1][unit]) for x in vals]
    order = sorted(range(len(acts)), key=lambda i: (-float(v[i]), i))[:k]
    return order, [float(v[i]) for i in order], [pos[i] for i in order]


@pytest.fixture(scope="module")
def cnn():
    return load_model("demo:cnn")


@pytest.fixture(scope="module")
def digits_scan(cnn):
    inputs = open_inputs(DIGITS)
    res = scan(cnn, ScanRequest(inputs, capture=("conv2", "fc"),
                                intervene={"conv2": "zero:3"}, top_k=9))
    return inputs, res


def test_digits_split_is_the_demo_test_split(cnn):
    inputs = open_inputs(DIGITS)
    assert len(inputs) == 200 and inputs.has_labels()
    sample = np.load(DIGITS.parent / "digits_sample.npy")
    # the demo's own sample is the split's first image
    assert torch.equal(inputs.item(0), torch.from_numpy(sample))


def test_digits_top9_of_a_channel_equal_brute_force(cnn, digits_scan):
    inputs, res = digits_scan
    acts, _ = brute(cnn, inputs, "conv2", False)
    for unit in (0, 3, 15):
        order, vals, pos = expected_top(acts, 1, unit, 9)
        got = res.top_inputs("conv2", unit)
        assert [t.index for t in got] == order
        assert np.allclose([t.value for t in got], vals, rtol=1e-5, atol=1e-6)
        assert [t.position for t in got] == pos


def test_digits_layer_statistics_equal_all_activations_at_once(cnn, digits_scan):
    inputs, res = digits_scan
    acts, _ = brute(cnn, inputs, "conv2", False)
    allv = torch.cat([a.reshape(-1) for a in acts]).double()
    s = res.layer("conv2")
    assert s.count == allv.numel() and s.nonfinite == 0
    assert math.isclose(s.min, float(allv.min()), rel_tol=1e-6)
    assert math.isclose(s.max, float(allv.max()), rel_tol=1e-6)
    assert math.isclose(s.mean, float(allv.mean()), rel_tol=1e-5, abs_tol=1e-6)
    assert math.isclose(s.std, float(allv.std(unbiased=False)), rel_tol=1e-5)
    assert int(s.hist_counts.sum()) == allv.numel()
    per_channel = torch.cat([a for a in acts]).double().mean(dim=(0, 2, 3)).numpy()
    assert np.allclose(s.unit_mean, per_channel, rtol=1e-5, atol=1e-7)


@pytest.mark.timeout(600)  # 200 single compare() runs: minutes on a loaded machine
def test_digits_accuracy_without_and_with_a_zeroed_channel_equal_compare(cnn, digits_scan):
    inputs, res = digits_scan
    plan = Plan(interventions={"conv2": Zero(units=(3,))})
    right0: dict[int, list[bool]] = {}
    right1: dict[int, list[bool]] = {}
    changed = 0
    for i in range(len(inputs)):
        r = compare(cnn.module, inputs.item(i), plan)
        p0, p1 = int(r.output_without.argmax()), int(r.output_with.argmax())
        y = int(inputs.label(i))
        right0.setdefault(y, []).append(p0 == y)
        right1.setdefault(y, []).append(p1 == y)
        changed += p0 != p1
        row = res.rows[i]
        assert (row.index, row.pred_without, row.pred_with, row.label_index) == (i, p0, p1, y)
        want = torch.softmax(r.output_with[0].double(), -1)[y]
        assert math.isclose(row.metric_with, float(want), rel_tol=1e-5)
    per_class = res.per_class()
    assert sorted(per_class) == [str(c) for c in range(10)]
    for c in range(10):
        assert per_class[str(c)]["n"] == len(right0[c])
        assert per_class[str(c)]["accuracy_without"] == sum(right0[c]) / len(right0[c])
        assert per_class[str(c)]["accuracy_with"] == sum(right1[c]) / len(right1[c])
    assert res.changed_fraction == changed / 200
    all0 = [v for vs in right0.values() for v in vs]
    assert res.accuracy(False) == sum(all0) / 200 and res.accuracy(False) > 0.9


def test_shards_merged_in_any_order_equal_one_scan(cnn):
    inputs = open_inputs(DIGITS)
    # one input a batch (a budget of one byte), so both see bit-identical activations
    req = ScanRequest(inputs, capture=("conv2",), intervene={"conv2": "zero:3"}, top_k=9,
                      budget_bytes=1, limit=60)
    whole = scan(cnn, req)
    parts = [scan_shard(cnn, s, req) for s in shards(60, 13)]
    merged = finish(merge(parts[::-1]), req, cnn.meaning)
    a, b = merged.layer("conv2"), whole.layer("conv2")
    assert np.array_equal(a.top_index, b.top_index) and np.array_equal(a.top_pos, b.top_pos)
    assert np.array_equal(a.top_values, b.top_values)
    assert np.array_equal(a.hist_counts, b.hist_counts) and np.array_equal(a.hist_edges, b.hist_edges)
    assert a.count == b.count and (a.min, a.max) == (b.min, b.max)
    assert math.isclose(a.mean, b.mean, rel_tol=1e-12) and math.isclose(a.std, b.std, rel_tol=1e-12)
    assert np.allclose(a.unit_mean, b.unit_mean, rtol=1e-12)
    assert [r.index for r in merged.rows] == list(range(60))
    assert merged.per_class() == whole.per_class() and merged.rows == whole.rows


def test_progress_eta_and_cancel(cnn):
    inputs = open_inputs(DIGITS)
    seen = []
    scan(cnn, ScanRequest(inputs, max_batch=16), progress=lambda d, t, e: seen.append((d, t, e)))
    assert seen[-1][:2] == (200, 200) and all(t == 200 for _, t, _ in seen)
    assert [d for d, _, _ in seen] == sorted(d for d, _, _ in seen) and seen[-1][2] == 0
    calls = []

    def stop() -> bool:
        calls.append(1)
        return len(calls) > 2

    with pytest.raises(Cancelled):
        scan(cnn, ScanRequest(inputs, max_batch=16), should_stop=stop)


def test_batches_never_exceed_the_budget_share(cnn):
    inputs = open_inputs(DIGITS)
    res = scan(cnn, ScanRequest(inputs, capture=("conv1",), budget_bytes=1, limit=30))
    assert res.batch_size == 1 and res.forwards == 30
    per_item = 8 * 8 * 8 * 4 + 10 * 4  # conv1's output and the logits of one input, float32
    res = scan(cnn, ScanRequest(inputs, capture=("conv1",), budget_bytes=3 * per_item * 5))
    assert res.batch_size == 5


def test_lm_text_top_tokens_equal_brute_force(tmp_path):
    lm = load_model("demo:lm")
    lines = ["the cat sat on the", "a dog ran", "hello world", "the cat sat on thx",
             "what is this", "on the mat the cat", "x"]
    f = tmp_path / "prompts.txt"
    f.write_text("\n".join(lines) + "\n\n", encoding="utf-8")
    inputs = open_inputs(f)
    assert len(inputs) == len(lines)
    res = scan(lm, ScanRequest(inputs, capture=("blocks.1",), intervene={"blocks.0": "zero"},
                               top_k=4))
    acts, outs = brute(lm, inputs, "blocks.1", True)
    for unit in (0, 7, 31):
        order, vals, pos = expected_top(acts, 2, unit, 4)
        got = res.top_inputs("blocks.1", unit)
        assert [t.index for t in got] == order
        assert np.allclose([t.value for t in got], vals, rtol=1e-5, atol=1e-6)
        assert [t.position for t in got] == pos
        for t in got:  # the highlighted token is the one the unit peaked at
            assert t.tokens == lm.meaning.codec.token_strings(lm.meaning.codec.encode(lines[t.index]))
    assert res.metric == "kl" and res.changed_fraction is not None
    for i, out in enumerate(outs):
        assert res.rows[i].pred_without == int(out[0, -1].argmax())


def test_jsonl_labels_as_tokens_give_accuracy(tmp_path):
    lm = load_model("demo:lm")
    rows = ['{"text": "the cat sat on th", "label": "e"}', '{"text": "hello worl", "label": "d"}']
    f = tmp_path / "set.jsonl"
    f.write_text("\n".join(rows), encoding="utf-8")
    res = scan(lm, ScanRequest(open_inputs(f)))
    codec = lm.meaning.codec
    assert [r.label_index for r in res.rows] == [codec.encode("e")[0], codec.encode("d")[0]]
    assert res.metric == "prob:label" and res.accuracy(False) is not None


def test_hf_gpt2_from_a_config(tmp_path):
    from tests.core.hf_models import gpt2

    lm = load_model(f"hf:{gpt2(tmp_path / 'gpt2')}")
    f = tmp_path / "p.txt"
    # the first input runs alone (it sizes the batches), the next two stack into one batch
    f.write_text("the cat sat on the mat\nthe cat sat on the mat\nthe cat sat on the mat\n"
                 "hello world\nthe dog sat on the log\na small test\n", encoding="utf-8")
    inputs = open_inputs(f)
    res = scan(lm, ScanRequest(inputs, capture=("transformer.h.0",),
                               intervene={"transformer.h.1.mlp": "zero"}, top_k=3))
    assert res.batch_size == 2
    acts, outs = brute(lm, inputs, "transformer.h.0", True)
    order, vals, pos = expected_top(acts, 2, 5, 3)
    got = res.top_inputs("transformer.h.0", 5)
    assert [t.index for t in got] == order and [t.position for t in got] == pos
    assert np.allclose([t.value for t in got], vals, rtol=1e-5, atol=1e-6)
    for i, out in enumerate(outs):
        logits = out.logits if hasattr(out, "logits") else out[0]
        assert res.rows[i].pred_without == int(logits[0, -1].argmax())
    r = compare(lm.module, inputs.item(3, lm.example_input, lm.meaning.codec),
                Plan(interventions={"transformer.h.1.mlp": Zero()}))
    from hookscope.core.analyses.sweep_metrics import make_metric

    kl = make_metric("kl", lm.meaning).cell(r.output_without, r.output_with)
    assert math.isclose(res.rows[3].metric_with, kl, rel_tol=1e-4, abs_tol=1e-9)
    r = compare(lm.module, inputs.item(2, lm.example_input, lm.meaning.codec),
                Plan(interventions={"transformer.h.1.mlp": Zero()}))  # from inside a batch
    kl = make_metric("kl", lm.meaning).cell(r.output_without, r.output_with)
    assert math.isclose(res.rows[2].metric_with, kl, rel_tol=1e-3, abs_tol=1e-8)


def test_session_scan_uses_the_runner_and_the_plan(cnn):
    from hookscope.core import Session

    s = Session.load("demo:cnn")
    try:
        s.capture("conv1")
        s.intervene("conv2", Zero(units=(3,)))
        res = s.scan(str(DIGITS), limit=40)
    finally:
        s.close()
    assert len(res.rows) == 40 and list(res.layers) == ["conv1"] and res.intervened
    want = scan(cnn, ScanRequest(open_inputs(DIGITS), capture=("conv1",),
                                 intervene={"conv2": "zero:3"}, limit=40))
    assert [(r.pred_without, r.pred_with) for r in res.rows] == \
           [(r.pred_without, r.pred_with) for r in want.rows]
    assert np.array_equal(res.layer("conv1").top_index, want.layer("conv1").top_index)


def test_an_image_folder_numbers_classes_as_imagefolder_does(tmp_path, cnn):
    from PIL import Image

    digits = open_inputs(DIGITS)
    names = ["zero", "one", "two"]  # not the model's labels: the folder's sorted order counts
    for i in range(60):
        y = int(digits.label(i))
        if y > 2:
            continue
        a = (digits.item(i)[0, 0].numpy() * 255).round().astype("uint8")
        (tmp_path / names[y]).mkdir(exist_ok=True)
        Image.fromarray(a, "L").save(tmp_path / names[y] / f"{i}.png")
    s = open_inputs(tmp_path)
    assert s.class_names == sorted(names)
    res = scan(cnn, ScanRequest(s))
    assert [r.label_index for r in res.rows] == [sorted(names).index(s.label(i))
                                                 for i in range(len(s))]


def test_a_request_travels_by_pickle_to_a_worker(cnn, tmp_path):
    import pickle

    f = tmp_path / "p.txt"
    f.write_text("a\nb\n")
    for inputs in (open_inputs(DIGITS), open_inputs(f)):
        req = ScanRequest(inputs, capture=("conv2",) if inputs.kind != "text" else (),
                          intervene={"conv2": "zero:3"} if inputs.kind != "text" else {},
                          limit=20)
        again = pickle.loads(pickle.dumps(req))
        assert len(again.inputs) == len(inputs)
    req = ScanRequest(open_inputs(DIGITS), ("conv2",), {"conv2": "zero:3"}, limit=20,
                      budget_bytes=1)
    part = pickle.loads(pickle.dumps(scan_shard(cnn, range(20), pickle.loads(pickle.dumps(req)))))
    here = scan_shard(cnn, range(20), req)
    assert part.rows == here.rows
    assert np.array_equal(part.layers["conv2"].top_index, here.layers["conv2"].top_index)
