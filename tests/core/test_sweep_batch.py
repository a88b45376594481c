"""Batched sweep cells: each row of a batched forward equals the single compare() it stands
for (exactly where the model's kernels round a batch as they round one input, to float
rounding elsewhere), the receipts too; and the sweep says when and why it did not batch."""

import numpy as np
import pytest
import torch
from torch import nn

from hookscope.core import At, Patch, Plan, compare, load_model, parse_input
from hookscope.core.base.errors import PlanError
from hookscope.core.analyses.sweep import sweep, sweep_result
from hookscope.core.analyses.sweep_cells import prepare_sweep, sweep_cells
from hookscope.core.analyses.sweep_metrics import make_metric
from hookscope.core.plan import parse_intervention

PROMPT = "text:the cat sat on the "
SOURCE = "text:the dog sat on the "


@pytest.fixture(scope="module")
def lm():
    return load_model("demo:lm")


@pytest.fixture(scope="module")
def cnn():
    return load_model("demo:cnn")


def count_forwards(module):
    n = [0]
    h = module.register_forward_pre_hook(lambda m, a: n.__setitem__(0, n[0] + 1))
    return n, h


def singles(model, x, res, template, metric):
    """Every cell's own compare(): its metric and receipts, in the grid's order."""
    m = make_metric(metric, model.meaning)
    names = list(res.coords)
    out = {}
    for idx in np.ndindex(res.values.shape):
        c = {n: res.coords[n][i] for n, i in zip(names, idx)}
        path = c.get("layer", "")
        ivs = {k.format(**c): parse_intervention(v.format(**c)) for k, v in template.items()}
        r = compare(model.module, x, Plan(interventions=ivs, keep_tensors=False),
                    codec=model.meaning.codec)
        out[idx] = (m.cell(r.output_without, r.output_with), r.receipts, path)
    return out


def assert_receipts_close(got, want):
    assert set(got) == set(want)
    for p in want:
        a, b = got[p].to_json_dict(), want[p].to_json_dict()
        for key in ("path", "intervention", "fired_calls", "changed", "elements", "alarm",
                    "output_changed"):
            assert a[key] == b[key], key
        for key in ("changed_fraction", "relative_change", "output_max_abs_diff",
                    "output_relative_change"):
            assert a[key] == pytest.approx(b[key], rel=1e-5, abs=1e-6), key


def test_demo_lm_patching_grid_batched_equals_each_comparison_exactly(lm):
    x = parse_input(PROMPT, lm.example_input, lm.meaning.codec)
    template = {"{layer}": f"patch:{SOURCE}@pos={{pos}}"}
    n, h = count_forwards(lm.module)
    try:
        res = sweep(lm.module, x, {"layer": "blocks.*", "pos": "all"}, template, "kl",
                    meaning=lm.meaning, batch=8)
    finally:
        h.remove()
    cells = res.values.size
    assert res.batched == cells and res.batch["rows"] == 8 and res.batch["note"] is None
    # 1 baseline + 1 source + ceil((cells + 1 clean row) / 8) batched forwards
    assert n[0] == 2 + -(-(cells + 1) // 8) == 2 + res.batch["forwards"]
    want = singles(lm, x, res, template, "kl")
    for idx, (value, receipts, _) in want.items():
        # demo:lm's kernels give a row of a batch the same bits as one input
        assert res.values[idx] == value
        assert_receipts_close(res.receipts[idx], receipts)
    assert (res.values > 0).any() and (res.values == 0).any()


def test_demo_cnn_zero_grid_and_strength_curve_batched(cnn):
    x = cnn.example_input
    template = {"{layer}": "zero@units={unit}"}
    res = sweep(cnn.module, x, {"layer": "conv1,conv2", "unit": "0:4"}, template, "prob:#3",
                meaning=cnn.meaning)
    assert res.batched == 8 and res.batch["forwards"] == 1
    want = singles(cnn, x, res, template, "prob:#3")
    got = torch.tensor([res.values[i] for i in want], dtype=torch.float64)
    exp = torch.tensor([v for v, _, _ in want.values()], dtype=torch.float64)
    # a batched convolution may round differently in the last bits
    torch.testing.assert_close(got, exp, rtol=1e-6, atol=1e-7)
    for idx, (_, receipts, _) in want.items():
        assert_receipts_close(res.receipts[idx], receipts)
    curve = sweep(cnn.module, x, {"f": "linspace(0,2,5)"}, {"conv2": "scale:{f}"}, "kl",
                  meaning=cnn.meaning)
    assert curve.batched == 5
    for k, f in enumerate(curve.coords["f"]):
        r = compare(cnn.module, x, Plan(interventions={"conv2": parse_intervention(f"scale:{f!r}")}))
        want_kl = make_metric("kl", cnn.meaning).cell(r.output_without, r.output_with)
        assert curve.values[k] == pytest.approx(want_kl, rel=1e-5, abs=1e-9)
    assert curve.values[2] == pytest.approx(0.0, abs=1e-12)


def test_gpt2_patching_and_heads_grid_batched(tmp_path):
    pytest.importorskip("transformers", reason="the hf extra (transformers) is not installed")
    import hf_models  # tests/core is on sys.path

    gpt2 = load_model(f"hf:{hf_models.gpt2(tmp_path / 'gpt2')}")
    x = parse_input("text:the cat sat on the", gpt2.example_input, gpt2.meaning.codec)
    metric = "logit-diff:' dog','cat'"
    template = {"{layer}": "patch:text:the cat sat on a@pos={pos}"}
    res = sweep(gpt2.module, x, {"layer": "transformer.h.*", "pos": "all"}, template, metric,
                meaning=gpt2.meaning)
    assert res.batched == res.values.size and res.batch["note"] is None
    want = singles(gpt2, x, res, template, metric)
    got = torch.tensor([res.values[i] for i in want], dtype=torch.float64)
    exp = torch.tensor([v for v, _, _ in want.values()], dtype=torch.float64)
    torch.testing.assert_close(got, exp, rtol=1e-5, atol=1e-6)
    assert (exp != res.baseline).any()
    heads = {"{layer}": "zero@heads={head}"}
    hres = sweep(gpt2.module, x, {"layer": "transformer.h.*.attn", "head": "0:2"}, heads, "kl",
                 meaning=gpt2.meaning)
    assert hres.batched == 4
    hwant = singles(gpt2, x, hres, heads, "kl")
    torch.testing.assert_close(torch.tensor([hres.values[i] for i in hwant], dtype=torch.float64),
                               torch.tensor([v for v, _, _ in hwant.values()], dtype=torch.float64),
                               rtol=1e-5, atol=1e-7)
    for idx, (_, receipts, _) in hwant.items():
        assert_receipts_close(hres.receipts[idx], receipts)


class _Mixer(nn.Module):
    """Rows meet: each row gets the batch mean added (as train-mode batch statistics do)."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.out = nn.Linear(4, 2)

    def forward(self, x):
        h = self.fc(x)
        return self.out(h + h.mean(0, keepdim=True))


def test_a_model_whose_rows_meet_is_found_by_the_clean_row_and_runs_unbatched():
    torch.manual_seed(0)
    m = _Mixer().eval()
    x = torch.randn(1, 4)
    res = sweep(m, x, {"u": "0:4"}, {"fc": "zero@units={u}"}, "max-abs-diff")
    assert res.batched == 0
    assert "not independent" in res.batch["note"]
    for u in range(4):
        r = compare(m, x, Plan(interventions={"fc": parse_intervention(f"zero@units={u}")}))
        assert res.values[u] == r.max_abs_diff


class _WithTable(nn.Module):
    """A layer whose output holds a tensor with no batch dimension beside its batched one."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.register_buffer("table", torch.arange(4.0))  # as long as the batch: 3 cells + 1

    def forward(self, x):
        return self.fc(x), self.table * 1


class _Outer(nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = _WithTable()
        self.out = nn.Linear(4, 2)

    def forward(self, x):
        h, table = self.inner(x)
        return self.out(h) + table.sum()


def test_an_intervention_that_changes_an_unbatched_leaf_stops_batching():
    torch.manual_seed(0)
    m = _Outer().eval()
    x, src = torch.randn(1, 4), torch.randn(1, 4)
    res = sweep(m, x, {"u": "0:3"}, {"inner": lambda u: Patch(src, at=At(units=[u]))},
                "max-abs-diff")
    assert res.batched == 0 and "not batched along dim 0" in res.batch["note"]
    for u in range(3):
        r = compare(m, x, Plan(interventions={"inner": Patch(src, at=At(units=[u]))}))
        assert res.values[u] == r.max_abs_diff


@pytest.mark.parametrize("case, words", [
    ("train", "train mode"),
    ("batch2", "not a batch of one"),
    ("off", "switched off"),
])
def test_the_sweep_says_why_it_did_not_batch(cnn, case, words):
    m, x, batch = cnn.module, cnn.example_input, True
    if case == "batch2":
        x = torch.cat([x, x])
    if case == "off":
        batch = False
    m.train(case == "train")
    try:
        res = sweep(m, x, {"u": "0:3"}, {"conv1": "zero@units={u}"}, "max-abs-diff", batch=batch)
    finally:
        m.eval()
    assert res.batched == 0 and words in res.batch["note"]
    assert res.to_json_dict()["batched"]["note"] == res.batch["note"]


def test_hook_sensitive_transformer_layers_are_not_batched():
    tr = load_model("demo:transformer")
    res = sweep(tr.module, tr.example_input, {"pos": "0:2"},
                {"encoder.layers.0.linear1": "zero@pos={pos}"}, "max-abs-diff")
    assert res.batched == 0 and "choose their kernels" in res.batch["note"]


def test_a_cell_error_in_a_batch_is_the_cells_own(lm):
    x = parse_input(PROMPT, lm.example_input, lm.meaning.codec)
    with pytest.raises(PlanError, match="out of range"):
        sweep(lm.module, x, {"pos": [0, 1, 99]}, {"blocks.0": "zero@pos={pos}"}, "kl",
              meaning=lm.meaning)


def test_sweep_cells_computes_any_subset_as_the_whole_sweep_does(lm):
    x = parse_input(PROMPT, lm.example_input, lm.meaning.codec)
    over, tpl = {"layer": "blocks.*", "pos": "10:14"}, {"{layer}": f"patch:{SOURCE}@pos={{pos}}"}
    whole = sweep(lm.module, x, over, tpl, "kl", meaning=lm.meaning)
    ctx = prepare_sweep(lm.module, x, over, tpl, "kl", meaning=lm.meaning, batch=3)
    got = sweep_cells(ctx, [7, 0, 5])
    assert [c.index for c in got] == [ctx.grid[7], ctx.grid[0], ctx.grid[5]]
    for c in got:
        assert c.value == whole.values[c.index]
    with pytest.raises(PlanError, match="outside"):
        sweep_cells(ctx, [8])
    # two workers, each with its own set-up, computing half the grid: the whole sweep
    halves = [sweep_cells(prepare_sweep(lm.module, x, over, tpl, "kl", meaning=lm.meaning),
                          part) for part in ([0, 2, 4, 6], [1, 3, 5, 7])]
    joined = sweep_result(ctx, halves[0] + halves[1])
    assert np.array_equal(joined.values, whole.values) and joined.axes == whole.axes
    assert joined.receipts.keys() == whole.receipts.keys()
    assert np.isnan(sweep_result(ctx, halves[0]).values[:, 1::2]).all()


def test_batch_budget_bounds_the_rows(lm):
    x = parse_input(PROMPT, lm.example_input, lm.meaning.codec)
    over, tpl = {"pos": "all"}, {"blocks.0": "zero@pos={pos}"}
    small = sweep(lm.module, x, over, tpl, "kl", meaning=lm.meaning, batch_bytes=1)
    assert small.batched == 0 and "budget" in small.batch["note"]
    some = sweep(lm.module, x, over, tpl, "kl", meaning=lm.meaning, batch=4)
    assert some.batch["rows"] == 4 and some.batched == x.shape[-1]
    assert np.array_equal(some.values, small.values)
