"""Plans checked against models, compare() semantics, devices."""

import pytest
import torch

from hookscope.core import (DeviceError, Plan, PlanError, available_devices, compare,
                            load_model, resolve_device, run)


def test_unknown_layer_names_close_matches():
    lm = load_model("demo:cnn")
    with pytest.raises(PlanError, match=r"unknown layer 'conv3'.*'conv1'|unknown layer 'conv3'.*'conv2'"):
        Plan(capture=["conv3"]).resolve(lm.module)


@pytest.mark.parametrize("bounds", [(1.0, -1.0), (float("nan"), 1.0), ("a", 1), (1,)])
def test_bad_clamp_bounds(bounds):
    with pytest.raises(PlanError, match="0"):
        Plan(clamp={"0": bounds})


def test_single_string_capture_refused():
    with pytest.raises(PlanError, match="list"):
        Plan(capture="fc1")


def test_plan_edits_return_new_plans():
    p = Plan(capture=("a",))
    q = p.with_clamp("a", -1, 1)
    assert p.clamp == {} and q.clamp == {"a": (-1.0, 1.0)}
    assert q.without_clamp("a").clamp == {}
    assert q.with_capture(["b"]).capture == ("b",)


def test_clamp_is_a_read_only_view_of_the_interventions():
    import dataclasses

    from hookscope.core import Clamp, Scale

    p = Plan(capture=("a",), clamp={"a": (-1, 1)}, interventions={"b": Scale(2.0)})
    assert p.interventions == {"b": Scale(2.0), "a": Clamp(-1.0, 1.0)}
    # replace() rebuilds from the fields: a clamp the new interventions drop stays dropped
    assert dataclasses.replace(p, interventions={}).clamp == {}
    assert dataclasses.replace(p, interventions={}).interventions == {}
    assert dataclasses.replace(p, capture=("c",)).clamp == {"a": (-1.0, 1.0)}
    # the shorthand still works through replace(), over the plan's own interventions
    q = dataclasses.replace(p, clamp={"c": (0, None)})
    assert q.clamp == {"a": (-1.0, 1.0), "c": (0.0, float("inf"))}
    assert Plan(clamp=q.clamp).clamp == q.clamp   # a view read back builds the same clamps
    with pytest.raises(TypeError):
        p.clamp["z"] = (0.0, 1.0)  # type: ignore[index]
    assert p == Plan(capture=("a",), interventions={"b": Scale(2.0), "a": Clamp(-1, 1)})


def test_capture_only_plan_leaves_output_unchanged_on_every_demo():
    for name in ("clamp", "features", "cnn", "transformer"):
        lm = load_model(f"demo:{name}")
        leaves = [p for p, m in lm.module.named_modules() if p and not list(m.children())]
        r = compare(lm.module, lm.example_input, Plan(capture=leaves))
        assert not r.outputs_differ and r.max_abs_diff == 0.0, name
        assert torch.equal(r.output_without, r.output_with)


def test_compare_result_fields():
    lm = load_model("demo:cnn")
    r = compare(lm.module, lm.example_input, Plan(capture=["conv1", "fc"], clamp={"conv1": (-0.1, 0.1)}))
    ref_without = lm.module(lm.example_input).detach()
    assert torch.equal(r.output_without, ref_without)
    assert r.outputs_differ and r.max_abs_diff == pytest.approx(float((r.output_with - ref_without).abs().max()))
    rec = r.captures["conv1"][0]
    assert rec.intervention == "clamp(-0.1, 0.1)"
    assert rec.tensor.min() >= -0.1 and rec.tensor.max() <= 0.1
    assert torch.equal(rec.tensor, rec.pre_tensor.clamp(-0.1, 0.1))
    frac = float(((rec.pre_tensor < -0.1) | (rec.pre_tensor > 0.1)).float().mean())
    assert rec.stats.fraction_clamped == pytest.approx(frac) == rec.pre_stats.fraction_clamped
    assert set(r.timings_ms) == {"baseline", "intervened", "overhead", "total"}
    assert r.captured_bytes == sum(rr.nbytes for recs in r.captures.values() for rr in recs) > 0
    assert r.to_json_dict()["captures"]["fc"][0]["shape"] == [1, 10]


def test_layer_that_never_runs_has_no_records():
    lm = load_model("demo:transformer")
    path = "encoder.layers.0.self_attn.out_proj"  # MultiheadAttention uses its weight directly
    r = run(lm.module, lm.example_input, Plan(capture=[path, "head"]))
    assert r.captures[path] == [] and r.calls[path] == 0 and len(r.captures["head"]) == 1


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the messages on a machine without CUDA")
def test_cuda_absent_is_a_clear_error():
    with pytest.raises(DeviceError, match="--device cpu"):
        resolve_device("cuda")
    lm = load_model("demo:clamp")
    with pytest.raises(DeviceError):
        compare(lm.module, lm.example_input, Plan(), device="cuda:0")
    cuda = [d for d in available_devices() if d.name.startswith("cuda")]
    assert cuda and not cuda[0].available and cuda[0].reason
    with pytest.raises(DeviceError, match="unknown device"):
        resolve_device("tpu-ish")


def test_baseline_reused_while_only_bounds_change():
    lm = load_model("demo:cnn")
    m, x = lm.module, lm.example_input
    r1 = compare(m, x, Plan(capture=["conv1"], clamp={"conv1": (-0.5, 0.5)}))
    assert not r1.baseline_reused
    r2 = compare(m, x, Plan(capture=["conv1"], clamp={"conv1": (-0.2, 0.2)}), baseline=r1.baseline)
    fresh = compare(m, x, Plan(capture=["conv1"], clamp={"conv1": (-0.2, 0.2)}))
    assert r2.baseline_reused and r2.output_without is r1.output_without
    assert torch.equal(r2.output_with, fresh.output_with)
    assert r2.timings_ms["baseline"] == r1.timings_ms["baseline"]
    # another set of hooked layers may take other kernels: the baseline is re-run
    r3 = compare(m, x, Plan(capture=["conv1", "fc"]), baseline=r1.baseline)
    assert not r3.baseline_reused


def test_should_stop_cancels_and_leaves_no_hooks():
    from hookscope.core import Cancelled

    lm = load_model("demo:cnn")
    m = lm.module
    asked = []

    def stop_after_three():
        asked.append(1)
        return len(asked) > 3

    with pytest.raises(Cancelled):
        compare(m, lm.example_input, Plan(capture=["conv1", "fc"]), should_stop=stop_after_three)
    assert all(not mod._forward_hooks and not mod._forward_pre_hooks for mod in m.modules())
    r = compare(m, lm.example_input, Plan(capture=["fc"]), should_stop=lambda: False)
    assert torch.equal(r.output_with, m(lm.example_input).detach())


def test_a_model_that_changes_its_input_in_place():
    from torch import nn

    class Doubler(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(2, 2)

        def forward(self, x):
            x.mul_(2)
            return self.lin(x)

    torch.manual_seed(0)
    m = Doubler()
    x = torch.tensor([[1.0, 2.0]])
    r = compare(m, x, Plan(capture=["lin"]))
    assert not r.outputs_differ and torch.equal(x, torch.tensor([[1.0, 2.0]]))
    assert torch.allclose(r.output_with, m.lin(torch.tensor([[2.0, 4.0]])).detach())
