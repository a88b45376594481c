"""add and project: each equal to a hand-written forward hook; vectors from two prompts,
from prompt sets and from files; saving, parsing, pickling, the exported script."""

import pickle

import numpy as np
import pytest
import torch

from hookscope.core import (Add, Intervention, Plan, PlanError, Project, SteeringVector, compare,
                            load_model, load_vector_file, parse_input, parse_intervention)
from hookscope.core.plan.directions import bind_vectors
from hookscope.core.analyses.steer_diff import diff_vector, resolve_vectors


@pytest.fixture(scope="module")
def lm():
    return load_model("demo:lm")


def prompt(lm, text):
    return parse_input(f"text:{text}", lm.example_input, lm.meaning.codec)


def hooked_output(model, layer, fn, x):
    """The model's output with a plain forward hook applying ``fn`` to ``layer``'s (first) output."""
    def hook(_m, _i, out):
        if isinstance(out, tuple):
            return (fn(out[0]),) + tuple(out[1:])
        return fn(out)

    h = model.get_submodule(layer).register_forward_hook(hook)
    try:
        with torch.inference_mode():
            return model(x) if not isinstance(x, dict) else model(**x)
    finally:
        h.remove()


def hand_output(model, layer, x, reduce="last"):
    got = []
    h = model.get_submodule(layer).register_forward_hook(lambda m, i, o: got.append(
        (o[0] if isinstance(o, tuple) else o).detach().clone()))
    try:
        with torch.inference_mode():
            model(x) if not isinstance(x, dict) else model(**x)
    finally:
        h.remove()
    out = got[0].double()
    return (out[:, -1, :] if reduce == "last" else out.mean(dim=1)).mean(dim=0)


def test_add_equals_a_hand_hook_on_demo_lm(lm):
    x = prompt(lm, "the cat sat on the ")
    vec = SteeringVector("v", torch.randn(64, generator=torch.Generator().manual_seed(1)))
    r = compare(lm.module, x, Plan(interventions={"blocks.0": Add(vec, 3.5)}))
    want = hooked_output(lm.module, "blocks.0", lambda t: t + 3.5 * vec.values.to(t.dtype), x)
    assert torch.equal(r.output_with, want) and r.outputs_differ


def test_add_in_norm_units_equals_a_hand_hook(lm):
    x = prompt(lm, "the dog sat on the ")
    vec = SteeringVector("v", torch.randn(64, generator=torch.Generator().manual_seed(2)))

    def fn(t):
        v = vec.values.to(t.dtype)
        return t + 0.5 * (v / v.norm() * t.norm(dim=-1).mean())

    r = compare(lm.module, x, Plan(interventions={"blocks.1": Add(vec, 0.5, norm_units=True)}))
    assert torch.equal(r.output_with, hooked_output(lm.module, "blocks.1", fn, x))


def test_project_equals_a_hand_hook_and_leaves_nothing_along_the_direction(lm):
    x = prompt(lm, "the cat sat on the ")
    vec = SteeringVector("v", torch.randn(64, generator=torch.Generator().manual_seed(3)))

    def fn(t):
        u = vec.values.to(t.dtype) / vec.values.to(t.dtype).norm()
        return t - (t @ u).unsqueeze(-1) * u

    plan = Plan(capture=["blocks.0.mlp"], interventions={"blocks.0.mlp": Project(vec)})
    r = compare(lm.module, x, plan)
    assert torch.equal(r.output_with, hooked_output(lm.module, "blocks.0.mlp", fn, x))
    after = r.captures["blocks.0.mlp"][0].tensor
    u = vec.values / vec.values.norm()
    before = r.captures["blocks.0.mlp"][0].baseline_tensor
    assert float((after @ u).abs().max()) < 1e-4 < float((before @ u).abs().max())


def test_a_vector_from_two_prompts_is_the_hand_difference(lm):
    a, b = "the cat sat", "the dog sat"
    for spec, how in ((f"diff:text:{a}|text:{b}", "last"), (f"diffmean:text:{a}|text:{b}", "mean")):
        vec = diff_vector(lm.module, "blocks.0", spec, "cd", lm.example_input, lm.meaning.codec)
        want = (hand_output(lm.module, "blocks.0", prompt(lm, a), how)
                - hand_output(lm.module, "blocks.0", prompt(lm, b), how)).float()
        assert torch.equal(vec.values, want) and vec.source == spec


def test_a_vector_from_two_prompt_sets_is_the_mean_difference(lm, tmp_path):
    pos, neg = ["the cat sat", "a cat sat on"], ["the dog sat", "a dog ran"]
    (tmp_path / "pos.txt").write_text("\n".join(pos) + "\n")
    (tmp_path / "neg.txt").write_text("\n\n".join(neg))
    vec = diff_vector(lm.module, "blocks.1", f"diff:{tmp_path / 'pos.txt'}|{tmp_path / 'neg.txt'}",
                      "s", lm.example_input, lm.meaning.codec)
    mean = lambda ps: torch.stack([hand_output(lm.module, "blocks.1", prompt(lm, p)) for p in ps]).mean(0)
    assert torch.equal(vec.values, (mean(pos) - mean(neg)).float())


def test_a_width_mismatch_is_refused_with_both_sizes(lm):
    vec = SteeringVector("short", torch.ones(10))
    with pytest.raises(PlanError, match=r"10 values.*'blocks.0.mlp.0'.*256 features"):
        compare(lm.module, prompt(lm, "the cat"), Plan(interventions={"blocks.0.mlp.0": Add(vec)}))


def test_vector_files_of_each_format_load_the_same_values(tmp_path):
    v = torch.randn(12)
    torch.save(v, tmp_path / "v.pt")
    np.save(tmp_path / "v.npy", v.numpy())
    from safetensors.torch import save_file
    save_file({"direction": v}, tmp_path / "v.safetensors")
    for name in ("v.pt", "v.npy", "v.safetensors"):
        got = load_vector_file(tmp_path / name)
        assert torch.equal(got.values, v) and got.name == "v"


def test_cli_words_bind_by_name_and_save_by_value():
    iv = parse_intervention("add:steer:2.5:norm")
    assert isinstance(iv, Add) and iv.vector == "steer" and iv.alpha == 2.5 and iv.norm_units
    with pytest.raises(PlanError, match="--vector steer="):
        bind_vectors({"fc": iv}, {})
    vec = SteeringVector("steer", torch.arange(4.0), "v.pt")
    bound = bind_vectors({"fc": iv}, {"steer": vec})["fc"]
    assert bound == Add(vec, 2.5, True)
    data = bound.to_dict()
    assert data["vector"]["source"] == "v.pt" and data["vector"]["values"] == [0.0, 1.0, 2.0, 3.0]
    assert Intervention.from_dict(data) == bound
    assert Intervention.from_dict(Project(vec).to_dict()) == Project(vec)
    assert pickle.loads(pickle.dumps(bound)) == bound  # Ray ships interventions by pickle
    data["vector"]["values"][0] = 9.0
    with pytest.raises(PlanError, match="sha256"):
        Intervention.from_dict(data)


def test_alpha_is_the_draggable_parameter():
    assert Add.draggable == ("alpha",)
    assert [p.name for p in Add.params()] == ["vector", "alpha", "norm_units"]
    iv = Add(SteeringVector("v", torch.ones(3)), 1.0).with_value("alpha", -2.0)
    assert iv.alpha == -2.0 and iv.describe() == "add(v x -2)"


def test_exported_leaf_functions_equal_the_kinds(lm):
    x = torch.randn(2, 5, 64, generator=torch.Generator().manual_seed(4))
    vec = SteeringVector("v", torch.randn(64, generator=torch.Generator().manual_seed(5)))
    for iv in (Add(vec, 1.5), Add(vec, -0.25, True), Project(vec)):
        ns = {"torch": torch, "math": __import__("math"), "functools": __import__("functools")}
        exec("\n\n".join(type(iv).leaf_definitions()), ns)  # the script's copy
        fn = eval(iv.to_torch_source(), ns)
        assert torch.equal(fn(x, None, None), iv.apply(x))


pytest.importorskip("transformers", reason="the hf extra (transformers) is not installed")
import hf_models  # noqa: E402  (tests/core is on sys.path)


@pytest.fixture(scope="module")
def gpt2(tmp_path_factory):
    return load_model(f"hf:{hf_models.gpt2(tmp_path_factory.mktemp('gpt2'))}")


def test_add_and_project_on_a_hf_gpt2_equal_hand_hooks(gpt2):
    x = parse_input("text:the cat sat on the mat", gpt2.example_input, gpt2.meaning.codec)
    layer = "transformer.h.0"
    vec = resolve_vectors(gpt2.module, {layer: Add("cd", 2.0)},
                          {"cd": "diff:text:the cat sat|text:the dog sat"}, gpt2.example_input,
                          gpt2.meaning.codec)[layer].vector
    want_vec = (hand_output(gpt2.module, layer, parse_input("text:the cat sat", None, gpt2.meaning.codec))
                - hand_output(gpt2.module, layer, parse_input("text:the dog sat", None, gpt2.meaning.codec)))
    assert torch.equal(vec.values, want_vec.float())
    u = vec.values / vec.values.norm()
    for iv, fn in ((Add(vec, 2.0), lambda t: t + 2.0 * vec.values.to(t.dtype)),
                   (Project(vec), lambda t: t - (t @ u.to(t.dtype)).unsqueeze(-1) * u.to(t.dtype))):
        r = compare(gpt2.module, x, Plan(interventions={layer: iv}))
        want = hooked_output(gpt2.module, layer, fn, x)
        assert torch.equal(r.output_with.logits, want.logits)
        assert r.receipts[layer].fired_calls == 1 and r.receipts[layer].alarm is None


def test_a_diff_spec_is_built_where_the_model_runs_and_reaches_the_export(lm):
    from hookscope.core.export.export import standalone_script
    from hookscope.core.analyses.steer_diff import resolve_pending, with_built_vectors

    spec = "diffmean:text:the cat sat|text:the dog sat"
    plan = Plan(interventions={"blocks.1": Add(spec, 2.0)})
    with pytest.raises(PlanError, match="run the model once"):
        standalone_script("demo:transformer", plan, "")
    cache: dict = {}
    built = resolve_pending(plan, lm.module, lm.example_input, lm.meaning.codec, cache)
    vec = built.interventions["blocks.1"].vector
    want = diff_vector(lm.module, "blocks.1", spec, "x", lm.example_input, lm.meaning.codec)
    assert torch.equal(vec.values, want.values) and vec.name == "the cat sat-the dog sat"
    assert resolve_pending(plan, lm.module, lm.example_input, lm.meaning.codec, cache) \
        .interventions["blocks.1"].vector is vec  # cached: a Live drag repeats no forward
    assert with_built_vectors(plan, built).interventions == built.interventions
    other = Plan(interventions={"blocks.1": Add("diff:text:a|text:b", 2.0)})
    assert with_built_vectors(other, built) == other  # another spec: not taken
