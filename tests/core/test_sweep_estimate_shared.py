"""An estimated sweep's forward with gradients standing in for its shared baseline forward:
the baseline it gives (output, leaf sizes and shapes, the clean metric) is the plain
baseline's bit for bit, verified cells and their receipts are the exact sweep's, and a
model whose kernels follow its hooks keeps its own baselines beside that forward."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from hookscope.core import load_model, parse_input
from hookscope.core.analyses import sweep
from hookscope.core.analyses.sweep_cells import prepare_sweep
from hookscope.core.analyses.sweep_estimate import SharedGradients
from hookscope.core.base.nested import tensor_leaves

pytest.importorskip("transformers", reason="the hf extra (transformers) is not installed")
import hf_models  # noqa: E402  (tests/core is on sys.path)

PROMPT = "the cat sat on the"
SOURCE = "the cat sat on a"
METRIC = "logit-diff:' dog','cat'"


@pytest.fixture(scope="module")
def gpt2(tmp_path_factory):
    return load_model(f"hf:{hf_models.gpt2(tmp_path_factory.mktemp('shared') / 'gpt2')}")


def _equal_leaves(a, b):
    la, lb = list(tensor_leaves(a)), list(tensor_leaves(b))
    assert [k for k, _ in la] == [k for k, _ in lb]
    for (_, x), (_, y) in zip(la, lb):
        assert torch.equal(x, y)


def _both(module, x, over, tpl, metric, meaning):
    plain = prepare_sweep(module, x, over, tpl, metric, meaning=meaning, measure=True)
    shared = SharedGradients()
    ctx = prepare_sweep(module, x, over, tpl, metric, meaning=meaning, measure=True,
                        shared_forward=shared)
    return plain, ctx, shared


@pytest.mark.parametrize("grid", ["resid_pre", "heads"])
def test_the_forward_with_gradients_gives_the_plain_baseline_bit_for_bit(gpt2, grid):
    x = parse_input(f"text:{PROMPT}", gpt2.example_input, gpt2.meaning.codec)
    over, tpl = ({"layer": "resid_pre.*", "pos": "all"},
                 {"{layer}": f"patch:text:{SOURCE}@pos={{pos}}"}) if grid == "resid_pre" else (
        {"block": "0:2", "head": "0:2"}, {"transformer.h.{block}.attn": "zero@heads={head}"})
    plain, ctx, shared = _both(gpt2.module, x, over, tpl, METRIC, gpt2.meaning)
    assert shared.done is not None and ctx.shared is not None and plain.shared is not None
    _equal_leaves(ctx.shared.output, plain.shared.output)
    assert ctx.clean == plain.clean
    assert ctx.activation_bytes == plain.activation_bytes  # the memory check's figure
    assert ctx.leaf_shapes == plain.leaf_shapes and ctx.rows == plain.rows
    assert ctx.row_bytes == plain.row_bytes and ctx.batch_note == plain.batch_note
    assert plain.counts["baseline"] == 1 and "gradient" not in plain.counts
    assert ctx.counts["baseline"] == 0 and ctx.counts["gradient"] == 1
    assert ctx.counts["source"] == plain.counts["source"]


def test_a_conv_nets_forward_with_gradients_gives_the_plain_baseline_bit_for_bit():
    cnn = load_model("demo:cnn")
    plain, ctx, _ = _both(cnn.module, cnn.example_input, {"u": "0:4"},
                          {"conv2": "zero@units={u}"}, "prob:#3", cnn.meaning)
    _equal_leaves(ctx.shared.output, plain.shared.output)
    assert ctx.activation_bytes == plain.activation_bytes and ctx.leaf_shapes == plain.leaf_shapes


def test_verified_cells_of_a_metric_reading_the_baseline_equal_the_exact_sweep(gpt2):
    """A metric of both outputs reads the shared baseline in every cell: verified cells, one
    by one and batched, are the exact sweep's, their receipts (output changed or not, by how
    much against the baseline) too."""
    codec = gpt2.meaning.codec
    x = parse_input(f"text:{PROMPT}", gpt2.example_input, codec)
    (dog,) = codec.encode(" dog")

    def moved(a, b):  # the dog logit's change from the baseline
        return b.logits[0, -1, dog].double() - a.logits[0, -1, dog].double()

    over = {"layer": "transformer.h.*.mlp", "pos": "all"}
    tpl = {"{layer}": f"patch:text:{SOURCE}@pos={{pos}}"}
    for batch in (False, True):
        exact = sweep(gpt2.module, x, over, tpl, moved, meaning=gpt2.meaning, batch=batch)
        est = sweep(gpt2.module, x, over, tpl, moved, meaning=gpt2.meaning, batch=batch,
                    estimate=True, verify=exact.cells)
        assert est.forwards["baseline"] == 0 and est.forwards["gradient"] == 1
        np.testing.assert_array_equal(est.values, exact.values)
        assert est.receipts == exact.receipts
        assert np.ptp(exact.values) > 0


class _Encoder(nn.Module):
    """One PyTorch Transformer layer (its kernels follow its hooks) and a head."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(3)
        self.layer = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True)
        self.head = nn.Linear(8, 4)

    def forward(self, x):
        return self.head(self.layer(x))[:, -1]


def test_a_model_whose_kernels_follow_its_hooks_keeps_its_own_baselines():
    """No shared baseline (each set of hooked layers runs its own): the forward with
    gradients runs on its own, with the memory budget checked as it goes (no forward just
    to measure), its estimate the hand-written one, verified cells the exact sweep's."""
    model = _Encoder().eval()
    x = torch.randn(1, 5, 8, generator=torch.Generator().manual_seed(1))
    kept = {}

    def swap(m, args, out):
        kept["a"] = out.detach().clone().requires_grad_(True)
        return kept["a"]

    h = model.layer.register_forward_hook(swap)
    try:
        with torch.enable_grad():
            m = model(x)[0, 2]
            (g,) = torch.autograd.grad(m, [kept["a"]])
    finally:
        h.remove()
    a = kept["a"].detach()
    over, tpl = {"u": "0:8"}, {"layer": "zero@units={u}"}
    exact = sweep(model, x, over, tpl, "logit:#2", batch=False)
    est = sweep(model, x, over, tpl, "logit:#2", estimate=True, verify=3, batch=False)
    for u in range(8):
        want = float(m.detach()) - float((g[..., u].double() * a[..., u].double()).sum())
        assert est.estimates[u] == pytest.approx(want, rel=1e-5, abs=1e-6)
    assert est.forwards["gradient"] == 1 and est.forwards["intervened"] == 3
    assert est.forwards["baseline"] == 1  # the verified cells' own baseline, nothing more
    for c, v in zip(est.verified["cells"], est.verified["values"]):
        assert v == exact.values[tuple(c)]


def test_verified_cells_on_an_accelerator_keep_a_plain_baseline():
    """Where kernels may follow requires_grad (CUDA), a sweep whose verified cells read the
    baseline runs a plain one; the estimate alone, or on the CPU, shares the forward."""
    from hookscope.core.analyses.sweep import shares_baseline

    assert shares_baseline("cpu", 0) and shares_baseline("cpu", 5)
    assert shares_baseline("cuda", 0) and shares_baseline("cuda:1", 0)
    assert not shares_baseline("cuda", 5) and not shares_baseline("cuda:0", 1)
    assert not shares_baseline("nonsense", 2)  # refused later, where the device is resolved
