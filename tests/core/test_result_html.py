"""A comparison shown in a notebook (RunResult._repr_html_) and as a DataFrame."""

from __future__ import annotations

import base64
import io
import re
import sys

import numpy as np
import pytest
import torch
from PIL import Image

from live_models import TinyNet

from hookscope.core import Clamp, HookscopeError, Session
from hookscope.core.views.output_thumbnail import HEIGHT, WIDTH, shown_values
from hookscope.core.engine.verdict import output_verdict

X = torch.tensor([[1.0, 2.0, 3.0]])


@pytest.fixture(scope="module")
def result():
    s = Session.from_module(TinyNet(), X, labels=["cat", "dog"], timeout_s=60)
    s.capture("fc1", "act")
    s.intervene("fc1", Clamp(-0.5, 0.5))
    r = s.run(timeout_s=60)
    s.close()
    return r


def _png(html: str) -> Image.Image:
    m = re.search(r'src="data:image/png;base64,([A-Za-z0-9+/=]+)"', html)
    assert m, "no inline PNG"
    return Image.open(io.BytesIO(base64.b64decode(m.group(1))))


def test_html_has_the_verdict_the_classes_the_captures_and_a_png(result):
    html = result._repr_html_()
    assert output_verdict(result).split(":")[0] in html
    top = ["cat", "dog"][int(result.output_without[0].argmax())]
    assert "Top classes" in html and top in html
    rows = re.findall(r"<tr><td>(fc1|act)</td>", html)
    assert rows == ["fc1", "act"]
    rec = result.captures["fc1"][0]
    assert f"{rec.stats.mean:.4g}" in html and f"{rec.baseline_stats.mean:.4g}" in html
    img = _png(html)
    assert img.size == (WIDTH, HEIGHT)
    colours = {c for _, c in img.convert("RGB").getcolors(WIDTH * HEIGHT)}
    assert (140, 140, 140) in colours and (230, 120, 20) in colours  # without and with drawn


def test_the_png_draws_the_classifiers_scores(result):
    assert np.array_equal(shown_values(result.output_with, result.meaning),
                          result.output_with[0].double().numpy())


def test_to_dataframe_has_one_row_per_captured_call(result):
    pd = pytest.importorskip("pandas")
    df = result.to_dataframe()
    assert isinstance(df, pd.DataFrame)
    assert list(df["layer"]) == ["fc1", "act"]
    row = df.set_index("layer").loc["fc1"]
    rec = result.captures["fc1"][0]
    assert row["mean_with"] == pytest.approx(rec.stats.mean)
    assert row["mean_without"] == pytest.approx(rec.baseline_stats.mean)
    assert row["fraction_changed"] == pytest.approx(rec.stats.fraction_changed)
    assert row["intervention"] == "clamp(-0.5, 0.5)"


def test_to_dataframe_without_pandas_says_how_to_get_it(result, monkeypatch):
    monkeypatch.setitem(sys.modules, "pandas", None)  # import pandas raises ImportError
    with pytest.raises(HookscopeError, match="pip install pandas"):
        result.to_dataframe()


def test_a_plain_output_shows_its_leaves():
    model = torch.nn.Sequential(torch.nn.Linear(3, 100))
    s = Session.from_module(model, X, timeout_s=60)
    s.intervene("0", Clamp(-0.1, 0.1))
    r = s.run(timeout_s=60)
    s.close()
    html = r._repr_html_()
    assert "No layer was captured" in html and "values changed" in html
    assert _png(html).size == (WIDTH, HEIGHT)  # 100 values: drawn as column ranges


def test_the_plain_text_repr_is_a_short_summary_not_every_tensor():
    """In a terminal (``python -i``, IPython) a result prints as a few lines, like the
    notebook's view: the verdict, the output's shape, captures, interventions, alarms."""
    from hookscope.core import Plan, Scale, compare, load_model

    lm = load_model("demo:lm")
    plan = Plan(capture=("blocks.0", "blocks.1"),
                interventions={"blocks.0.attn.probs": Clamp(-5, 5), "blocks.1": Scale(0.5)})
    r = compare(lm.module, lm.example_input, plan)
    text = repr(r)
    lines = text.splitlines()
    assert len(lines) <= 8 and all(len(line) < 400 for line in lines)
    assert lines[0] == f"<RunResult on cpu: {output_verdict(r)}"
    assert "output: 1×19×32" in lines[1] and text.endswith(">")
    assert "captures: blocks.0 (1×19×64), blocks.1 (1×19×64)" in text
    assert "blocks.1=scale(0.5)" in text and "ALARM blocks.0.attn.probs" in text
    assert "tensor(" not in text   # no tensor printed
    assert str(r) == text
