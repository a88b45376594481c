"""Saving a session whose model was built in this Python session: the file says the model is
not in it, and with weights=True and a class importable by name, it reopens the model."""

from __future__ import annotations

import json

import pytest
import torch

from live_models import TinyNet, WidthNet

from hookscope.core.model.code_trust import CodeTrustError
from hookscope.core import Clamp, Session, SpecError
from hookscope.core.session.live_save import LiveModelNotSaved, factory_reference
from hookscope.core.session.session_file import read_session_file

X = torch.tensor([[1.0, 2.0, 3.0]])


def _session(model):
    s = Session.from_module(model, X, timeout_s=60)
    s.capture("fc1") if hasattr(model, "fc1") else None
    return s


def test_saving_without_weights_warns_and_the_file_says_so(tmp_path):
    s = _session(TinyNet())
    try:
        with pytest.warns(LiveModelNotSaved, match="model itself is not in this file"):
            path = s.save(tmp_path / "a.hookscope.json")
        d = json.loads(path.read_text())
        assert d["model"]["spec"] == "live:TinyNet" and "not in this file" in d["model"]["note"]
        assert "weights=True" in d["model"]["note"] and "live_models:TinyNet" in d["model"]["note"]
        assert not list(tmp_path.glob("*.pt"))
        setup = read_session_file(path)  # the plan is still readable, for the live model
        assert setup.plan.capture == ("fc1",)
        with pytest.raises(SpecError, match="built in a Python session"):
            Session.open_file(path, timeout_s=60)
    finally:
        s.close()


def test_weights_and_an_importable_class_reopen_the_same_numbers(tmp_path):
    model = TinyNet()
    with torch.no_grad():
        model.fc1.weight.add_(0.25)  # trained in the notebook: not what TinyNet() builds
    s = _session(model)
    s.intervene("fc1", Clamp(-0.5, 0.5))
    want = s.run(timeout_s=60)
    try:
        path = s.save(tmp_path / "b.hookscope.json", weights=True)  # no warning: it reopens
        d = json.loads(path.read_text())
        assert d["model"]["spec"] == "live_models:TinyNet"
        assert d["model"]["weights"] == "b.weights.pt"
        assert d["input"] == {"text": "b.input.pt", "file": True}  # the example, beside it
        # the file names code (the class's module): data, so it reopens only with a yes
        with pytest.raises(CodeTrustError, match="live_models"):
            Session.open_file(path, timeout_s=60)
        again = Session.open_file(path, timeout_s=60, trust_code=True)
        try:
            got = again.run(timeout_s=60)
            assert torch.equal(got.output_with, want.output_with)
            assert torch.equal(got.output_without, want.output_without)
        finally:
            again.close()
    finally:
        s.close()


def test_a_class_that_needs_arguments_gets_weights_and_says_why(tmp_path):
    s = Session.from_module(WidthNet(5), X, timeout_s=60)
    try:
        with pytest.warns(LiveModelNotSaved, match=r"needs arguments \(width\)"):
            path = s.save(tmp_path / "c.hookscope.json", weights=True)
        d = json.loads(path.read_text())
        assert d["model"]["spec"] == "live:WidthNet" and d["model"]["weights_file"] == "c.weights.pt"
        state = torch.load(tmp_path / "c.weights.pt", weights_only=True)
        assert torch.equal(state["fc.weight"], s.model.module.fc.weight)
    finally:
        s.close()


def test_classes_of_the_notebook_itself_are_not_named():
    class Local(torch.nn.Module):
        def forward(self, x):
            return x

    ref, why = factory_reference(Local())
    assert ref is None and "inside a function" in why
    Main = type("Main", (torch.nn.Module,), {"__module__": "__main__"})
    ref, why = factory_reference(Main())
    assert ref is None and "notebook" in why
    assert factory_reference(TinyNet()) == ("live_models:TinyNet", "")
