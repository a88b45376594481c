"""What a notebook shows and what a live session saves, tried as an attacker would: model and
tokenizer text that is HTML, outputs and captures far larger than a page, values that are not
finite, a weights file that cannot be written, a session file that names a live model."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest
import torch
from torch import nn

from hookscope.core import Clamp, HookscopeError, Session, SpecError
from hookscope.core.views.output_thumbnail import comparison_png
from hookscope.core.session.session_file import read_session_file

HOSTILE = ['<script>alert(1)</script>', '"><img src=x onerror=alert(2)>']


class HtmlCodec:
    """A tokenizer whose every token reads as markup."""

    name = "<b>codec</b>"

    def encode(self, text):
        return [1, 2, 3]

    def decode(self, ids):
        return "".join(self.token_strings(ids))

    def token_strings(self, ids):
        return [HOSTILE[int(i) % 2] for i in ids]


class TokenModel(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(8, 4)
        self.head = nn.Linear(4, 8)

    def forward(self, ids):
        return self.head(self.emb(ids))


def _only_our_markup(html: str) -> None:
    assert len(re.findall(r"<img ", html)) <= 1  # only the inline PNG
    assert "<script" not in html
    assert "<img src=x" not in html


def _run(model, x, **kw):
    s = Session.from_module(model, x, timeout_s=60, **kw)
    try:
        return s, s.run(timeout_s=60)
    finally:
        s.close()


def test_labels_that_are_markup_are_escaped():
    model = nn.Sequential(nn.Linear(3, 2))
    s = Session.from_module(model, torch.ones(1, 3), labels=HOSTILE, timeout_s=60)
    s.capture("0")
    s.intervene("0", Clamp(-0.1, 0.1))
    r = s.run(timeout_s=60)
    s.close()
    html = r._repr_html_()
    _only_our_markup(html)
    assert "&lt;script&gt;" in html


def test_tokens_that_are_markup_are_escaped():
    s, r = _run(TokenModel(), torch.tensor([[1, 2, 3]]), tokenizer=HtmlCodec())
    html = r._repr_html_()
    _only_our_markup(html)
    assert "&lt;script&gt;" in html and "Next token" in html


class Reused(nn.Module):
    """One layer called 300 times, and a wide output: far more than a page."""

    def __init__(self) -> None:
        super().__init__()
        self.step = nn.Linear(16, 16)
        self.out = nn.Linear(16, 200_000)

    def forward(self, x):
        for _ in range(300):
            x = torch.tanh(self.step(x))
        return self.out(x)


def test_a_huge_output_and_many_captures_stay_a_small_page():
    s = Session.from_module(Reused(), torch.ones(1, 16), timeout_s=60)
    s.capture("step")
    s.intervene("step", Clamp(-0.5, 0.5))
    r = s.run(timeout_s=120)
    s.close()
    t0 = time.perf_counter()
    html = r._repr_html_()
    assert time.perf_counter() - t0 < 10
    assert len(html) < 100_000
    assert "… and 260 more" in html  # the table is cut, and says where the rest is


@pytest.mark.parametrize("fill", [float("nan"), float("inf")])
def test_outputs_that_are_not_finite_draw_or_say_nothing(fill):
    a = torch.full((1, 10), fill)
    png = comparison_png(a, a.clone())
    assert png is None  # nothing finite to draw, and no warning raised (warnings are errors)
    mixed = torch.tensor([[1.0, fill, -2.0, 0.5]])
    assert comparison_png(mixed, mixed * 2) is not None


def test_a_weights_file_that_cannot_be_written_leaves_no_session_file(tmp_path):
    s = Session.from_module(nn.Sequential(nn.Linear(3, 2)), torch.ones(1, 3), timeout_s=60)
    try:
        (tmp_path / "x.weights.pt").mkdir()  # the weights' name is taken by a folder
        with pytest.raises(HookscopeError):
            s.save(tmp_path / "x.hookscope.json", weights=True)
        assert not (tmp_path / "x.hookscope.json").exists()
        assert [p.name for p in tmp_path.iterdir()] == ["x.weights.pt"]  # no temporary left
    finally:
        s.close()


def test_a_session_file_naming_a_live_model_runs_nothing(tmp_path):
    path = tmp_path / "live.hookscope.json"
    path.write_text(json.dumps({
        "format": "hookscope-session", "version": 1,
        "model": {"spec": "live:__import__('os').system('touch pwned')", "note": "<script>" * 1000,
                  "weights_file": "/etc/passwd"},
        "plan": {"capture": ["0"]}}))
    setup = read_session_file(path)  # the note and weights_file are not read as anything
    assert setup.weights is None and setup.plan.capture == ("0",)
    with pytest.raises(SpecError, match="built in a Python session"):
        Session.open_file(path, timeout_s=30)
    assert not (tmp_path / "pwned").exists() and not (Path.cwd() / "pwned").exists()


def test_the_weights_written_beside_never_replace_the_input_the_session_reads(tmp_path):
    x = tmp_path / "y.weights.pt"
    torch.save(torch.ones(1, 3), x)
    s = Session.from_module(nn.Sequential(nn.Linear(3, 2)), torch.zeros(1, 3), timeout_s=60)
    try:
        s.set_input(str(x))
        with pytest.raises(HookscopeError, match="would overwrite the input file"):
            s.save(tmp_path / "y.hookscope.json", weights=True)
        assert torch.equal(torch.load(x, weights_only=True), torch.ones(1, 3))
        assert not (tmp_path / "y.hookscope.json").exists()
    finally:
        s.close()
