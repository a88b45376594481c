"""A session keeps ``LAYER:input`` and ``resid_*`` places through its file, runs them, and
estimates a sweep (``Session.sweep(..., estimate=True, verify=K)``) as sweep() does."""

from __future__ import annotations

import numpy as np
import torch

from hookscope.core import Scale, Session, load_model, parse_input
from hookscope.core.analyses import sweep

PROMPT = "text:the cat sat on the "
SOURCE = "text:the dog sat on the "


def test_session_file_keeps_inputs_and_named_points_and_runs_them(tmp_path):
    s = Session.load("demo:lm", input_text=PROMPT)
    try:
        s.capture("resid_pre.1", "blocks.0.ln2:input")
        s.intervene("blocks.1.ln2:input", Scale(0.5))
        first = s.run(timeout_s=60)
        f = s.save(tmp_path / "inputs.hookscope.json")
    finally:
        assert s.close()
    again = Session.open_file(f, timeout_s=60)
    try:
        assert again.plan == s.plan
        r = again.run(timeout_s=60)
    finally:
        assert again.close()
    assert set(r.captures) == {"blocks.1:input", "blocks.0.ln2:input"}
    assert torch.equal(r.output_with, first.output_with)
    assert not torch.equal(r.output_with, r.output_without)


def test_session_sweep_estimate_equals_sweep():
    over = {"layer": "resid_pre.*", "pos": "3:6"}
    tpl = {"{layer}": f"patch:{SOURCE}@pos={{pos}}"}
    metric = "logit-diff:' ',t"
    s = Session.load("demo:lm", input_text=PROMPT)
    try:
        got = s.sweep(over, tpl, metric, estimate=True, verify=2, timeout_s=120)
    finally:
        assert s.close()
    lm = load_model("demo:lm")
    x = parse_input(PROMPT, lm.example_input, lm.meaning.codec)
    want = sweep(lm.module, x, over, tpl, metric, meaning=lm.meaning, estimate=True, verify=2)
    np.testing.assert_allclose(got.estimates, want.estimates, rtol=1e-6, atol=1e-9)
    assert got.verified["cells"] == want.verified["cells"]
    np.testing.assert_allclose(got.verified["values"], want.verified["values"], rtol=1e-6)
