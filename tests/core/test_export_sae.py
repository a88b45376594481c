"""``--export-script`` with ``sae-*`` edits: the SAEs' weights are written beside the script as
safetensors, the arithmetic in plain torch; run where Hookscope cannot be imported (torch and
safetensors alone), the script prints the numbers compare() gives."""

from __future__ import annotations

import ast
import json
import sys

import numpy as np
import pytest

from hookscope.app.cli import main
from hookscope.core import Plan, attach_sae, compare, load_model, parse_input, parse_intervention
from hookscope.core.engine.output_diff import flat_array
from hookscope.core.engine.run import record_json
from test_export_torch_only import run_torch_only

PROMPT = "text:the cat sat on the mat"
CASES = {
    "ablate": {"blocks.0": "sae-ablate:1,2,3,5,8,13,21"},
    "clamp_aimed": {"blocks.0": "sae-clamp:4=3.5@pos=-1"},
    "scale": {"blocks.1": "sae-scale:7,9=-2.0"},
}


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    folder = tmp_path_factory.mktemp("sae_export")
    scripts = {}
    for name, edits in CASES.items():
        scripts[name] = folder / f"{name}.py"
        argv = ["run", "demo:lm", "--input", PROMPT, "--capture", "blocks.0,blocks.1",
                "--sae", "blocks.0=demo", "--sae", "blocks.1=demo", "--quiet",
                "--export-script", str(scripts[name])]
        for layer, kind in edits.items():
            argv += ["--intervene", f"{layer}={kind}"]
        assert main(argv) == 0
    outputs = run_torch_only(list(scripts.values()), folder)
    return folder, scripts, outputs


def _compare(edits):
    lm = load_model("demo:lm")
    for layer in ("blocks.0", "blocks.1"):
        attach_sae(lm.module, layer, "demo")
    x = parse_input(PROMPT, lm.example_input, lm.meaning.codec)
    plan = Plan(capture=["blocks.0", "blocks.1"],
                interventions={k: parse_intervention(v) for k, v in edits.items()})
    return compare(lm.module, x, plan)


@pytest.mark.parametrize("name", list(CASES))
def test_the_exported_sae_script_prints_what_compare_gives(exported, name):
    folder, scripts, outputs = exported
    rc, stdout, _ = outputs[scripts[name]]
    assert rc == "0", rc
    got, r = json.loads(stdout), _compare(CASES[name])
    assert r.outputs_differ  # the edits act: equal outputs would prove nothing
    # float32 arithmetic in the same order; the JSON rounds to 6 decimals
    np.testing.assert_allclose(got["output_without"], flat_array(r.output_without), atol=2e-6)
    np.testing.assert_allclose(got["output_with"], flat_array(r.output_with), atol=2e-6)
    assert got["outputs_differ"] is True
    for path, recs in r.captures.items():
        for mine, rec in zip(got["stats"][path], recs, strict=True):
            want = record_json(rec)
            for key in ("min", "max", "mean", "std"):
                assert mine[key] == pytest.approx(want[key], rel=1e-5, abs=1e-6), (path, key)
            assert mine.get("fraction_changed") == pytest.approx(want.get("fraction_changed"))
    assert (folder / f"{name}.sae.safetensors").is_file()


def test_the_script_imports_torch_and_safetensors_alone(exported):
    _, scripts, _ = exported
    tree = ast.parse(scripts["ablate"].read_text())
    roots = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    roots |= {n.module.split(".")[0] for n in ast.walk(tree)
              if isinstance(n, ast.ImportFrom) and n.module and n.level == 0}
    assert "safetensors" in roots and "torch" in roots
    assert roots - {"torch", "safetensors", "__future__"} <= set(sys.stdlib_module_names), roots


def test_the_sae_weights_never_replace_an_input(tmp_path, capsys):
    """The weights file beside the script goes through the output checks: a --weights file of
    that name is refused before anything runs, and left as it was."""
    lm = load_model("demo:lm")
    weights = tmp_path / "repro.sae.safetensors"
    from safetensors.torch import save_file

    save_file({k: v.contiguous() for k, v in lm.module.state_dict().items()}, str(weights))
    before = weights.read_bytes()
    rc = main(["run", "demo:lm", "--weights", str(weights), "--sae", "blocks.0=demo",
               "--intervene", "blocks.0=sae-ablate:1", "--export-script", str(tmp_path / "repro.py")])
    assert rc == 2 and "SAE weights" in capsys.readouterr().err
    assert weights.read_bytes() == before and not (tmp_path / "repro.py").exists()
