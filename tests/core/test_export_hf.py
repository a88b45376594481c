"""The exported script of an ``hf:FOLDER`` model: transformers rebuilds the model from the same
folder, and the interventions stay plain torch. Each script runs in a subprocess where
hookscope cannot be imported; its numbers equal compare()'s."""

import ast
import json

import numpy as np
import pytest

from hookscope.core import (Add, At, HookscopeError, Patch, Plan, Scale, Zero, compare,
                            load_model)
from hookscope.core.engine.output_diff import flat_array
from hookscope.core.analyses.steer_diff import resolve_pending
from hookscope.core.export.export import standalone_script
from hookscope.core.model.inputs import parse_input
from test_export_torch_only import run_torch_only

pytest.importorskip("transformers", reason="the hf extra (transformers) is not installed")
import hf_models  # noqa: E402  (tests/core is on sys.path)

PROMPT = "text:the cat sat on the mat"
OTHER = "text:the dog sat on the log"


def _layer(module, suffix: str) -> str:
    """The first module path ending with ``suffix`` (transformers renames containers)."""
    return next(n for n, _ in module.named_modules() if n.endswith(suffix))


@pytest.fixture(scope="module")
def ran(tmp_path_factory):
    folder = tmp_path_factory.mktemp("hf_script")
    gpt2 = f"hf:{hf_models.gpt2(folder / 'gpt2')}"
    vit = f"hf:{hf_models.vit(folder / 'vit')}"
    llama = f"hf:{hf_models.llama(folder / 'llama')}"
    g, v, ll = load_model(gpt2), load_model(vit), load_model(llama)
    steer = Plan(capture=["transformer.h.1"], interventions={
        "transformer.h.1": Add("diff:text:the cat sat|text:the dog sat", 4.0)})
    vit_attn = _layer(v.module, ".0.attention")
    vit_block = vit_attn.rsplit(".", 1)[0].replace(".0", ".1")
    cases = {
        "patch_last": (g, PROMPT, Plan(capture=["transformer.h.0"], interventions={
            "transformer.h.0": Patch(OTHER, at=At(positions=[-1]))})),
        "heads": (g, PROMPT, Plan(capture=["transformer.h.0.attn"], interventions={
            "transformer.h.0.attn": Zero(at=At(heads=[1]))})),
        "steer": (g, PROMPT, resolve_pending(steer, g.module, parse_input(
            PROMPT, g.example_input, g.meaning.codec), g.meaning.codec, {})),
        "llama_heads": (ll, PROMPT, Plan(capture=["model.layers.0.self_attn"], interventions={
            "model.layers.0.self_attn": Zero(at=At(heads=[1], positions="last"))})),
        "resid_mid": (g, PROMPT, Plan(capture=["resid_mid.1", "transformer.h.1.ln_2:input"],
                                      interventions={"resid_mid.0": Patch(OTHER, at=At(positions=[-1])),
                                                     "resid_mid.1": Scale(0.5)})),
        "llama_resid_mid": (ll, PROMPT, Plan(capture=["resid_mid.0"], interventions={
            "resid_mid.1": Patch(OTHER, at=At(positions=[2, -1]))})),
        "vit": (v, "", Plan(capture=[vit_attn, vit_block], interventions={
            vit_attn: Zero(at=At(heads=[0])),
            vit_block: Scale(0.5, at=At(positions=[0]))})),
    }
    scripts = {}
    for name, (lm, text, plan) in cases.items():
        scripts[name] = folder / f"{name}_script.py"
        scripts[name].write_text(standalone_script(lm.spec, plan, input_text=text))
    outputs = run_torch_only(list(scripts.values()), folder)
    done = {}
    for name, (lm, text, plan) in cases.items():
        rc, stdout, err = outputs[scripts[name]]
        assert rc == "0", f"{name}: {rc}\n{err[-2000:]}"
        x = parse_input(text, lm.example_input, lm.meaning.codec)
        done[name] = (json.loads(stdout), compare(lm.module, x, plan, codec=lm.meaning.codec),
                      scripts[name].read_text())
    return done


@pytest.mark.parametrize("name", ["patch_last", "heads", "steer", "llama_heads", "resid_mid",
                                  "llama_resid_mid", "vit"])
def test_hf_script_prints_what_compare_gives(ran, name):
    got, r, _ = ran[name]
    assert r.outputs_differ and got["outputs_differ"]
    np.testing.assert_allclose(got["output_with"], flat_array(r.output_with), atol=2e-5)
    np.testing.assert_allclose(got["output_without"], flat_array(r.output_without), atol=2e-5)
    assert got["max_abs_diff"] == pytest.approx(r.max_abs_diff, rel=1e-4, abs=1e-5)
    assert set(got["stats"]) == set(r.captures)
    for path, recs in r.captures.items():
        assert [s["shape"] for s in got["stats"][path]] == [list(c.stats.shape) for c in recs]
        for s, c in zip(got["stats"][path], recs):
            assert s["mean"] == pytest.approx(c.stats.mean, rel=1e-5, abs=1e-6)
            assert s["std"] == pytest.approx(c.stats.std, rel=1e-5, abs=1e-6)
            if c.stats.fraction_changed is not None:  # heads change at the projection's input
                assert s["fraction_changed"] == pytest.approx(c.stats.fraction_changed, abs=1e-9)


def test_hf_script_rebuilds_with_transformers_and_keeps_the_rest_plain_torch(ran):
    _, _, text = ran["heads"]
    tree = ast.parse(text)
    imported = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import)
                for a in n.names}
    imported |= {(n.module or "").split(".")[0] for n in ast.walk(tree)
                 if isinstance(n, ast.ImportFrom)}
    assert imported - {"__future__"} <= {"base64", "dataclasses", "functools", "io", "json",
                                          "math", "sys", "collections", "torch", "transformers"}
    assert "trust_remote_code=False" in text and "'GPT2LMHeadModel'" in text
    assert "HEAD_SITES = {'transformer.h.0.attn': ('transformer.h.0.attn.c_proj', 2)}" in text
    # the steering vector is inlined in the script, not computed there from the prompts
    line = ran["steer"][2].split("INTERVENE = {")[1].splitlines()[1]
    assert "vector=torch.tensor([" in line and "diff:" not in line


def test_a_folder_with_its_own_code_is_refused(tmp_path):
    folder = hf_models.gpt2(tmp_path / "custom")
    cfg = json.loads((folder / "config.json").read_text())
    cfg["auto_map"] = {"AutoModelForCausalLM": "modeling_evil.Evil"}
    (folder / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(HookscopeError, match="modeling_evil.py"):
        standalone_script(f"hf:{folder}", Plan(interventions={"transformer.h.0": Zero()}), PROMPT)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["custom"]


def test_a_relative_folder_is_written_as_its_absolute_path(tmp_path, monkeypatch):
    hf_models.gpt2(tmp_path / "small")
    monkeypatch.chdir(tmp_path)
    text = standalone_script("hf:./small", Plan(interventions={"transformer.h.0": Zero()}), PROMPT)
    assert f"model = load_hf({str((tmp_path / 'small').resolve())!r}, 'GPT2LMHeadModel')" in text
