"""``hookscope diff``: the JSON and the table say what hookscope.core.diff says; --b-weights,
--b-dtype, interventions in both models and --save-direction read back by --vector."""

from __future__ import annotations

import copy
import json
import sys
from pathlib import Path

import pytest
import torch

from hookscope.app.cli import main
from hookscope.core import diff, load_model, load_vector_file


def nudged(tmp_path: Path, layer: str = "conv2") -> tuple[Path, dict]:
    lm = load_model("demo:cnn")
    state = {k: v.clone() for k, v in lm.module.state_dict().items()}
    g = torch.Generator().manual_seed(1)
    state[f"{layer}.weight"] += 1e-2 * torch.randn(state[f"{layer}.weight"].shape, generator=g)
    path = tmp_path / "nudged.pt"
    torch.save(state, path)
    return path, state


def run_json(argv: list[str], capsys) -> dict:
    rc = main(["diff", *argv, "--json"])
    cap = capsys.readouterr()
    assert rc == 0, cap.err
    return json.loads(cap.out)


def test_nudged_conv2_json_names_what_the_api_names(tmp_path, capsys):
    path, state = nudged(tmp_path)
    got = run_json(["demo:cnn", "--b-weights", str(path)], capsys)
    lm = load_model("demo:cnn")
    want = diff(lm, weights=str(path))
    assert got["first_divergent"]["path"] == want.first_divergent.path == "conv2"
    assert got["first_divergent"]["call"] == 0
    assert [r["path"] for r in got["layers"]] == [r.path for r in want.layers]
    for row in got["layers"][:4]:
        assert row["max_abs_diff"] == 0 and row["relative_change"] == 0 and row["cosine"] == 1
    # conv2 by hand: two models, a plain hook on conv2 in each
    b = copy.deepcopy(lm.module)
    b.load_state_dict(state)
    outs = []
    for m in (lm.module, b):
        h = m.conv2.register_forward_hook(lambda _m, _i, o: outs.append(o.clone()))
        with torch.inference_mode():
            m(lm.example_input)
        h.remove()
    assert got["layers"][4]["max_abs_diff"] == float((outs[0] - outs[1]).abs().max())
    assert got["tolerance"] == 1e-3 and got["only_in_a"] == [] and got["only_in_b"] == []
    assert set(got["output"]) >= {"max_abs_diff", "relative_change", "top_a", "top_b"}

    top = max(r["relative_change"] for r in got["layers"])
    quiet = run_json(["demo:cnn", "--b-weights", str(path), "--tolerance", str(top * 1.01)],
                     capsys)
    assert quiet["first_divergent"] is None


def test_table_marks_the_first_divergent_row(tmp_path, capsys):
    path, _ = nudged(tmp_path)
    rc = main(["diff", "demo:cnn", "--b-weights", str(path)])
    cap = capsys.readouterr()
    assert rc == 0, cap.err
    marked = [ln for ln in cap.out.splitlines() if "<- first past the tolerance" in ln]
    assert len(marked) == 1 and marked[0].split()[0] == "conv2"
    assert "first divergent  conv2 (call 0)" in cap.out


def test_table_and_json_say_the_layers_only_one_model_has(capsys):
    """Two factories whose trees differ: the table names every layer only one model ran and
    the call only B made, as the JSON and hookscope.core.diff do."""
    from tests.support import differing_trees

    source = differing_trees.__file__
    want = diff(differing_trees.Net(norm=True).eval(),
                differing_trees.Net(extras=6, twice=True).eval(), differing_trees.example())
    argv = ["diff", f"{source}:build_a", f"{source}:build_b"]
    rc = main(argv)
    cap = capsys.readouterr()
    assert rc == 0, cap.err
    lines = cap.out.splitlines()
    assert "only in A        norm" in lines
    assert "only in B        " + ", ".join(want.only_in_b) in lines
    assert any(ln.startswith("note: ") and "'act': 1 and 2" in ln for ln in lines)
    got = run_json(argv[1:], capsys)
    assert got["only_in_a"] == list(want.only_in_a) and got["only_in_b"] == list(want.only_in_b)


def test_bfloat16_and_interventions_in_both(capsys):
    got = run_json(["demo:cnn", "--b-dtype", "bfloat16"], capsys)
    rels = [r["relative_change"] for r in got["layers"]]
    assert len(rels) == 10 and all(1e-4 < r < 3e-2 for r in rels)
    assert any("bfloat16" in n for n in got["notes"])
    # fc zeroed in both models: both outputs are zeros, though every layer before differs
    zeroed = run_json(["demo:cnn", "--b-dtype", "bfloat16", "--intervene", "fc=zero"], capsys)
    assert zeroed["output"]["max_abs_diff"] == 0
    assert [r for r in zeroed["layers"] if r["path"] == "fc"][0]["max_abs_diff"] == 0


def test_save_direction_is_a_vector_that_run_reads(tmp_path, capsys):
    path, state = nudged(tmp_path, "fc")
    vec = tmp_path / "tune.pt"
    got = run_json(["demo:cnn", "--b-weights", str(path), "--save-direction", f"fc={vec}"],
                   capsys)
    assert got["first_divergent"]["path"] == "fc"
    lm = load_model("demo:cnn")
    b = copy.deepcopy(lm.module)
    b.load_state_dict(state)
    with torch.inference_mode():
        want = (b(lm.example_input).double() - lm.module(lm.example_input).double()).mean(0)
    read = load_vector_file(vec)
    torch.testing.assert_close(read.values, want.float(), rtol=1e-6, atol=1e-7)
    # the vector steers: A plus the difference at fc is B's output there
    rc = main(["run", "demo:cnn", "--vector", f"tune={vec}", "--intervene", "fc=add:tune",
               "--json", "--full-output"])
    cap = capsys.readouterr()
    assert rc == 0, cap.err
    steered = json.loads(cap.out)
    with torch.inference_mode():
        b_out = b(lm.example_input)
    torch.testing.assert_close(torch.tensor(steered["output_with"]), b_out.flatten(),
                               rtol=1e-5, atol=1e-5)


@pytest.fixture(scope="module")
def gpt2(tmp_path_factory):
    pytest.importorskip("transformers", reason="the hf extra (transformers) is not installed")
    sys.path.insert(0, str(Path(__file__).parents[1] / "core"))
    import hf_models

    return hf_models.gpt2(tmp_path_factory.mktemp("gpt2") / "g")


def test_gpt2_with_c_fc_changed_by_b_weights(gpt2, tmp_path, capsys):
    lm = load_model(f"hf:{gpt2}")
    state = {k: v.clone() for k, v in lm.module.state_dict().items()}
    key = "transformer.h.1.mlp.c_fc.weight"
    state[key] += 0.2 * torch.randn(state[key].shape, generator=torch.Generator().manual_seed(2))
    weights = tmp_path / "tuned.pt"
    torch.save(state, weights)
    prompt = "text:the cat sat on the mat"
    got = run_json([f"hf:{gpt2}", "--b-weights", str(weights), "--input", prompt], capsys)
    assert got["first_divergent"]["path"] == "transformer.h.1.mlp.c_fc"
    assert all(r["max_abs_diff"] == 0 for r in got["layers"]
               if r["path"].startswith("transformer.h.0."))
    b = copy.deepcopy(lm.module)
    b.load_state_dict(state)
    api = diff(lm, b, prompt)
    assert api.first_divergent.path == got["first_divergent"]["path"]
    torch.testing.assert_close(torch.tensor(got["output"]["kl_per_position"]),
                               torch.tensor(api.output["kl_per_position"]), rtol=1e-9, atol=0)
    assert got["output"]["top1_agreement"] == api.output["top1_agreement"]
