"""Plans that gave a silently wrong number now act as written or are refused in one line:
``add@units=`` adds on the selected units (it used to change nothing and say the values
already were what it set); ``add:V:A:norm`` with an all-zero vector and ``sae-clamp``/
``sae-scale`` with NaN or infinity (a NaN output); ``logspace`` past a float's range
(infinite axis values and numpy warnings); a ``.pt`` batch of zero inputs in
``hookscope scan`` (an empty report)."""

from __future__ import annotations

import json

import pytest
import torch

from hookscope.app.cli import main
from hookscope.core import Add, At, Plan, SteeringVector, compare, load_model, parse_input
from hookscope.core.plan.directions import Project

PROMPT = "text:the cat sat on the "
LAYER = "blocks.0"
TOL = dict(rtol=1e-5, atol=1e-5)


def one_line(capsys, argv, says):
    assert main(argv) == 2
    out, err = capsys.readouterr()
    assert err.count("\n") == 1 and err.startswith("hookscope: error: "), err
    assert says in err and "Traceback" not in err and "Warning" not in err, err
    return err


def hooked(module, x, change):
    handle = module.get_submodule(LAYER).register_forward_hook(lambda m, a, o: change(o))
    with torch.inference_mode():
        out = module(x)
    handle.remove()
    return out


def test_add_on_units_adds_there_like_a_hand_hook(tmp_path, capsys):
    v = torch.randn(64, generator=torch.Generator().manual_seed(1))
    torch.save(v, tmp_path / "v.pt")
    code = main(["run", "demo:lm", "--input", PROMPT, "--vector", f"v={tmp_path / 'v.pt'}",
                 "--intervene", f"{LAYER}=add:v:2@units=0:8", "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    rc = json.loads(out)["receipts"][LAYER]
    lm = load_model("demo:lm")
    x = parse_input(PROMPT, lm.example_input, lm.meaning.codec)

    def add_first_8(o):
        o = o.clone()
        o[..., :8] += 2 * v[:8]
        return o

    want = hooked(lm.module, x, add_first_8)
    base = hooked(lm.module, x, lambda o: o)
    assert rc["alarm"] is None and rc["changed"] == x.shape[-1] * 8, rc
    assert json.loads(out)["max_abs_diff"] == pytest.approx((want - base).abs().max().item(), rel=1e-5)
    vec = SteeringVector("v", v)
    got = compare(lm.module, x, Plan(interventions={LAYER: Add(vec, 2.0, at=At(units="0:8"))}))
    assert torch.allclose(got.output_with, want, **TOL)

    # at one position and some units: both selections hold
    def add_last_pos(o):
        o = o.clone()
        o[:, -1, 3:5] += 2 * v[3:5]
        return o

    got = compare(lm.module, x, Plan(interventions={
        LAYER: Add(vec, 2.0, at=At(positions="-1", units="3:5"))}))
    assert torch.allclose(got.output_with, hooked(lm.module, x, add_last_pos), **TOL)

    # project on some units: the removal along the whole axis, kept on those units
    def project_first_8(o):
        u = v / v.norm()
        return torch.cat([(o - (o @ u).unsqueeze(-1) * u)[..., :8], o[..., 8:]], dim=-1)

    got = compare(lm.module, x, Plan(interventions={LAYER: Project(vec, at=At(units="0:8"))}))
    assert torch.allclose(got.output_with, hooked(lm.module, x, project_first_8), **TOL)


def test_add_norm_with_an_all_zero_vector_is_refused(tmp_path, capsys):
    torch.save(torch.zeros(64), tmp_path / "z.pt")
    one_line(capsys, ["run", "demo:lm", "--vector", f"z={tmp_path / 'z.pt'}",
                      "--intervene", f"{LAYER}=add:z:1:norm"], "all zeros")


@pytest.mark.parametrize("spec", ["sae-clamp:3=nan", "sae-clamp:3=inf", "sae-scale:3=nan",
                                  "sae-scale:3=-inf"])
def test_sae_edits_refuse_nan_and_infinity(capsys, spec):
    one_line(capsys, ["run", "demo:lm", "--sae", f"{LAYER}=demo", "--intervene", f"{LAYER}={spec}"],
             spec.split(":")[0])


@pytest.mark.parametrize("axis", ["logspace(0,400,3)", "logspace(-400,0,3)"])
def test_logspace_past_a_floats_range_is_refused(capsys, axis):
    one_line(capsys, ["sweep", "demo:lm", "--over", f"a={axis}", "--intervene",
                      f"{LAYER}=scale:{{a}}"], "beyond what a float holds")


@pytest.mark.parametrize("saved", ["tensor", "dict"])
def test_a_pt_batch_of_zero_inputs_is_refused_in_scan(tmp_path, capsys, saved):
    empty = torch.zeros(0, 5, dtype=torch.long)
    torch.save(empty if saved == "tensor" else {"inputs": empty, "labels": torch.zeros(0).long()},
               tmp_path / "none.pt")
    one_line(capsys, ["scan", "demo:lm", "--inputs", str(tmp_path / "none.pt")], "holds no input")
