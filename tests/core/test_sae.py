"""SAEs in SAELens's layout: reading, features, and edits over the SAE basis, each equal
to a hand computation; an edit that changes no feature changes nothing."""

import json

import pytest
import torch
from safetensors.torch import save_file

from hookscope.core import (Plan, PlanError, SaeAblate, SaeClamp, SaeScale, Session, attach_sae,
                            compare, load_model, load_sae, parse_intervention, sae_features)


def hand_encode(sae, x):
    return torch.relu((x - sae.b_dec) @ sae.W_enc + sae.b_enc)


def hand_output(model, x, layer, change):
    """The model's output with a plain hook replacing ``layer``'s output by ``change(out)``."""
    h = model.get_submodule(layer).register_forward_hook(lambda _m, _i, out: change(out))
    try:
        with torch.no_grad():
            return model(x)
    finally:
        h.remove()


@pytest.fixture
def lm():
    lm = load_model("demo:lm")
    attach_sae(lm.module, "blocks.0", "demo")
    return lm


def test_demo_sae_is_small_sparse_and_reads_the_residual_stream():
    sae = load_sae("demo")
    assert (sae.d_in, sae.d_sae) == (64, 128) and sae.architecture == "standard"
    lm = load_model("demo:lm")
    acts = []
    h = lm.module.blocks[0].register_forward_hook(lambda _m, _i, o: acts.append(o[0]))
    with torch.no_grad():
        lm.module(lm.example_input)
    h.remove()
    f = sae.encode(acts[0])
    assert torch.allclose(f, hand_encode(sae, acts[0]), atol=1e-6)
    assert (f > 0).sum(-1).float().mean() < 32  # sparse
    err = (acts[0] - sae.decode(f)).norm() / acts[0].norm()
    assert err < 0.3


def busiest_features(lm, sae, n=2):
    acts = []
    h = lm.module.blocks[0].register_forward_hook(lambda _m, _i, o: acts.append(o[0].clone()))
    with torch.no_grad():
        lm.module(lm.example_input)
    h.remove()
    return hand_encode(sae, acts[0]).sum(0).topk(n).indices.tolist()


def set_features(f, feats, fn):
    out = f.clone()
    out[..., feats] = fn(out[..., feats])
    return out


@pytest.mark.parametrize("kind, make, fn", [
    ("ablate", lambda fs: SaeAblate(tuple(fs)), lambda v: v * 0),
    ("clamp", lambda fs: SaeClamp(tuple(fs[:1]), 5.0), lambda v: torch.full_like(v, 5.0)),
    ("scale", lambda fs: SaeScale(tuple(fs[:1]), 0.5), lambda v: v * 0.5),
])
def test_feature_edits_equal_a_hand_computation(lm, kind, make, fn):
    sae = load_sae("demo")
    feats = busiest_features(lm, sae)
    edit = make(feats)

    def by_hand(out):
        f = hand_encode(sae, out)
        err = out - (f @ sae.W_dec + sae.b_dec)
        return set_features(f, list(edit.features), fn) @ sae.W_dec + sae.b_dec + err

    expected = hand_output(lm.module, lm.example_input, "blocks.0", by_hand)
    r = compare(lm.module, lm.example_input, Plan().with_intervention("blocks.0", edit))
    assert torch.allclose(r.output_with, expected, atol=1e-4)
    assert r.outputs_differ


@pytest.mark.parametrize("text", ["sae-ablate", "sae-ablate:", "sae-scale:5=1.0"])
def test_an_edit_of_no_feature_changes_nothing(lm, text):
    r = compare(lm.module, lm.example_input, Plan().with_intervention("blocks.0", parse_intervention(text)))
    assert torch.equal(r.output_with, r.output_without) and not r.outputs_differ


def test_width_mismatch_and_missing_sae_are_refused_with_both_sizes(lm):
    attach_sae(lm.module, "blocks.0.mlp.0", "demo")
    with pytest.raises(PlanError, match="64 features.*256 wide"):
        compare(lm.module, lm.example_input, Plan().with_intervention("blocks.0.mlp.0", SaeAblate((1,))))
    with pytest.raises(PlanError, match="no SAE is attached"):
        compare(lm.module, lm.example_input, Plan().with_intervention("blocks.1", SaeAblate((1,))))
    with pytest.raises(PlanError, match="out of range"):
        compare(lm.module, lm.example_input, Plan().with_intervention("blocks.0", SaeAblate((500,))))
    with pytest.raises(PlanError, match="64 features.*10 wide"):
        attach_sae(lm.module, "blocks.0", "demo", width=10)


def test_feature_view_equals_hand_topk(lm):
    sae = load_sae("demo")
    acts = []
    h = lm.module.blocks[0].register_forward_hook(lambda _m, _i, o: acts.append(o[0].clone()))
    with torch.no_grad():
        lm.module(lm.example_input)
    h.remove()
    f = hand_encode(sae, acts[0])
    plan = Plan().with_intervention("blocks.0", SaeAblate((int(f[-1].argmax()),)))
    view = sae_features(lm.module, lm.example_input, plan, "blocks.0", top_k=3)["blocks.0"]
    vals, idx = f.topk(3, -1)
    assert [[i for i, _ in row] for row in view.top_without] == [
        [i for i, v in zip(ri, rv) if v > 0] for ri, rv in zip(idx.tolist(), vals.tolist())]
    # With the top feature of the last position ablated, it is gone from that position.
    assert int(f[-1].argmax()) not in [i for i, _ in view.top_with[-1]]
    recon = f @ sae.W_dec + sae.b_dec
    err = ((acts[0] - recon).norm(dim=-1) / acts[0].norm(dim=-1))
    assert torch.allclose(torch.tensor(view.error_without), err, atol=1e-5)
    assert set(view.to_json_dict()) >= {"top_without", "top_with", "recon_error_without"}


def test_jumprelu_threshold(tmp_path):
    torch.manual_seed(0)
    d_in, d_sae = 4, 6
    t = {"W_enc": torch.randn(d_in, d_sae), "b_enc": torch.randn(d_sae),
         "W_dec": torch.randn(d_sae, d_in), "b_dec": torch.zeros(d_in),
         "threshold": torch.full((d_sae,), 0.5)}
    save_file(t, str(tmp_path / "sae_weights.safetensors"))
    (tmp_path / "cfg.json").write_text(json.dumps({"d_in": d_in, "d_sae": d_sae,
                                                   "architecture": "jumprelu",
                                                   "apply_b_dec_to_input": False}))
    sae = load_sae(tmp_path)
    x = torch.randn(3, d_in)
    pre = x @ t["W_enc"] + t["b_enc"]
    assert torch.equal(sae.encode(x), torch.where(pre > 0.5, pre, torch.zeros_like(pre)))


def test_session_attaches_and_reports(tmp_path):
    s = Session.load("demo:lm")
    try:
        s.attach_sae("blocks.0", "demo")
        s.intervene("blocks.0", SaeAblate((1, 2)))
        report = s.sae_features()
        assert list(report) == ["blocks.0"] and report["blocks.0"].d_sae == 128
        assert s.saes == {"blocks.0": "demo"}
    finally:
        s.close()


def test_hf_gpt2_block_edit_equals_hand_and_empty_edit_changes_nothing(tmp_path):
    pytest.importorskip("transformers", reason="the hf extra (transformers) is not installed")
    import hf_models

    lm = load_model(f"hf:{hf_models.gpt2(tmp_path / 'gpt2')}")
    torch.manual_seed(1)
    d_in, d_sae = 32, 64
    t = {"W_enc": torch.randn(d_in, d_sae) * 0.3, "b_enc": torch.zeros(d_sae),
         "W_dec": torch.randn(d_sae, d_in) * 0.3, "b_dec": torch.randn(d_in) * 0.1}
    folder = tmp_path / "sae"
    folder.mkdir()
    save_file(t, str(folder / "sae_weights.safetensors"))
    (folder / "cfg.json").write_text(json.dumps({"d_in": d_in, "d_sae": d_sae}))
    attach_sae(lm.module, "transformer.h.0", folder)
    sae = load_sae(folder)
    x = lm.example_input
    r0 = compare(lm.module, x, Plan().with_intervention("transformer.h.0", SaeAblate(())))
    assert torch.equal(r0.output_with.logits, r0.output_without.logits)
    acts = []
    h = lm.module.transformer.h[0].register_forward_hook(
        lambda _m, _i, o: acts.append((o[0] if isinstance(o, tuple) else o).clone()))
    with torch.no_grad():
        lm.module(**x)
    h.remove()
    feats = hand_encode(sae, acts[0][0]).sum(0).topk(3).indices.tolist()

    def by_hand(out):
        hidden = out[0] if isinstance(out, tuple) else out
        f = hand_encode(sae, hidden)
        g = f.clone()
        g[..., feats] = 0
        new = hidden + (g - f) @ sae.W_dec
        return (new,) + tuple(out[1:]) if isinstance(out, tuple) else new

    h = lm.module.transformer.h[0].register_forward_hook(lambda _m, _i, o: by_hand(o))
    try:
        with torch.no_grad():
            expected = lm.module(**x).logits
    finally:
        h.remove()
    r = compare(lm.module, x, Plan().with_intervention("transformer.h.0", SaeAblate(tuple(feats))))
    assert torch.allclose(r.output_with.logits, expected, atol=1e-5) and r.outputs_differ


def test_an_aimed_feature_edit_changes_the_picked_position_alone(lm):
    """sae-clamp@pos=-1: the last position is encoded, edited and decoded as the unaimed edit
    does it; every other position of the block's output is left as it was."""
    x = torch.tensor([[3, 1, 4, 1, 5, 9, 2, 6]])
    aimed = compare(lm.module, x, Plan(capture=["blocks.0"], interventions={
        "blocks.0": parse_intervention("sae-clamp:4=3.5@pos=-1")}))
    every = compare(lm.module, x, Plan(capture=["blocks.0"], interventions={
        "blocks.0": parse_intervention("sae-clamp:4=3.5")}))
    got, base = aimed.captures["blocks.0"][0].tensor, aimed.captures["blocks.0"][0].baseline_tensor
    assert torch.equal(got[:, :-1], base[:, :-1])
    torch.testing.assert_close(got[:, -1], every.captures["blocks.0"][0].tensor[:, -1])
    assert not torch.equal(got[:, -1], base[:, -1])


def test_the_feature_view_of_an_aimed_edit_shows_it_at_the_picked_position_alone(lm):
    x = torch.tensor([[3, 1, 4, 1, 5, 9, 2, 6]])
    sae = load_sae("demo")
    report = sae_features(lm.module, x, Plan(interventions={
        "blocks.0": parse_intervention("sae-clamp:4=3.5@pos=-1")}), "blocks.0", top_k=128)
    view = report["blocks.0"]
    acts = compare(lm.module, x, Plan(capture=["blocks.0"], keep_tensors=True)
                   ).captures["blocks.0"][0].tensor[0]
    f = sae.encode(acts)
    as_dict = lambda row: {i: a for i, a in row}  # noqa: E731
    for p in range(x.shape[1] - 1):  # untouched positions: the layer's own features
        assert as_dict(view.top_with[p]) == pytest.approx(as_dict(view.top_without[p]))
    last = as_dict(view.top_with[-1])
    assert last[4] == pytest.approx(3.5)
    want = {i: float(a) for i, a in enumerate(f[-1]) if a > 0 and i != 4}
    assert {i: a for i, a in last.items() if i != 4} == pytest.approx(want, rel=1e-5, abs=1e-6)
