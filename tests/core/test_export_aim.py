"""The exported script reproduces ``at=`` (positions, heads, units) and text source inputs
with torch alone: run in a subprocess where hookscope cannot be imported, its numbers
equal compare()'s."""

import json

import numpy as np
from pathlib import Path

import pytest

from hookscope.core import Add, At, MeanAblate, Noise, Patch, Plan, Scale, Zero, compare, load_model
from hookscope.core.export.export import standalone_script
from hookscope.core.model.inputs import parse_input
from hookscope.core.engine.output_diff import flat_array
from test_export_torch_only import run_torch_only

PROMPT, OTHER = "text:the cat sat on the ", "text:the dog sat on the "



def _built(plan, text):
    """``plan`` with its ``diff:`` vector computed on demo:lm, as the window does before export."""
    from hookscope.core.analyses.steer_diff import resolve_pending

    lm = load_model("demo:lm")
    x = parse_input(text, lm.example_input, lm.meaning.codec)
    return resolve_pending(plan, lm.module, x, lm.meaning.codec, {})


@pytest.fixture(scope="module")
def ran(tmp_path_factory):
    folder = tmp_path_factory.mktemp("aim_script")
    vit = f"{Path(__file__).with_name('vit_models.py')}:make"
    cases = {
        "lm": ("demo:lm", PROMPT, Plan(capture=["blocks.0.attn", "blocks.1"], interventions={
            "blocks.1": Patch(OTHER, at=At(positions=[-1])),
            "blocks.0.attn": Zero(at=At(heads=[0, 2], positions="last")),
            "blocks.0.mlp": Scale(0.0, at=At(positions="3:6", units=[1, 7])),
            "blocks.1.mlp": MeanAblate(OTHER, at=At(positions=[-2])),
        })),
        "lm_steer": ("demo:lm", PROMPT, _built(Plan(capture=["blocks.1"], interventions={
            "blocks.1": Add("diff:text:the cat sat|text:the dog sat", 3.0)}), PROMPT)),
        "vit": (vit, "", Plan(capture=["attn"], interventions={
            "attn": Noise(0.5, seed=3, at=At(heads=[1])),
            "embed": Zero(at=At(units=[2])),
        })),
    }
    scripts = {}
    for name, (spec, text, plan) in cases.items():
        scripts[name] = folder / f"{name}_script.py"
        scripts[name].write_text(standalone_script(spec, plan, input_text=text))
    outputs = run_torch_only(list(scripts.values()), folder)
    done = {}
    for name, (spec, text, plan) in cases.items():
        rc, stdout, _ = outputs[scripts[name]]
        assert rc == "0", f"{name}: {rc}"
        lm = load_model(spec)
        x = parse_input(text, lm.example_input, lm.meaning.codec)
        done[name] = (json.loads(stdout), compare(lm.module, x, plan, codec=lm.meaning.codec))
    return done


@pytest.mark.parametrize("name", ["lm", "lm_steer", "vit"])
def test_script_reproduces_aimed_interventions(ran, name):
    got, r = ran[name]
    assert r.outputs_differ and got["outputs_differ"]
    np.testing.assert_allclose(got["output_with"], flat_array(r.output_with), atol=2e-6)
    np.testing.assert_allclose(got["output_without"], flat_array(r.output_without), atol=2e-6)
    for path, recs in r.captures.items():
        assert [s["shape"] for s in got["stats"][path]] == [list(c.stats.shape) for c in recs]
        for s, c in zip(got["stats"][path], recs):
            assert s["mean"] == pytest.approx(c.stats.mean, rel=1e-5, abs=1e-6)


def test_script_export_of_multihead_attention_heads_says_why(tmp_path):
    from hookscope.core import HookscopeError

    (tmp_path / "mha.py").write_text(
        "import torch\nfrom torch import nn\n\n\nclass M(nn.Module):\n"
        "    def __init__(self):\n        super().__init__()\n"
        "        self.mha = nn.MultiheadAttention(8, 2, batch_first=True)\n\n"
        "    def forward(self, x):\n        return self.mha(x, x, x)[0]\n\n\n"
        "def make():\n    return M().eval(), torch.randn(1, 3, 8)\n")
    with pytest.raises(HookscopeError, match="nn.MultiheadAttention's heads are computed again"):
        standalone_script(f"{tmp_path / 'mha.py'}:make",
                          Plan(interventions={"mha": Zero(at=At(heads=[0]))}))
