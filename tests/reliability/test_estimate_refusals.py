"""``hookscope sweep --estimate`` refuses, in one line with status 2 and before any forward
where it can know, what a first-order estimate cannot stand for: metrics with no
first-order signal (kl from the baseline, top-changed, max-abs-diff, box-count), a
detector's box lists, a model in train mode, an output with no floating-point scores, and a
backward over the memory budget."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from hookscope.app.cli import main
from hookscope.core import load_model
from hookscope.core.analyses import EstimateRefused, sweep

CNN = ["sweep", "demo:cnn", "--over", "u=0:2", "--intervene", "conv1=zero@units={u}", "--estimate"]
DETECTOR = ["sweep", "demo:detector", "--over", "f=0.5,2", "--intervene", "backbone.conv1=scale:{f}",
            "--estimate"]


@pytest.mark.parametrize("argv, words", [
    (CNN + ["--metric", "kl"], "gradient is zero"),
    (CNN + ["--metric", "top-changed"], "gradient is zero"),
    (CNN + ["--metric", "max-abs-diff"], "no first-order signal"),
    (DETECTOR + ["--metric", "box-count"], "box-count"),
    (DETECTOR + ["--metric", "top-score"], "box lists"),
    (CNN + ["--metric", "prob:#3", "--train"], "train mode"),
])
def test_refused_in_one_line_before_any_forward(argv, words, capsys, monkeypatch):
    calls = []
    real = torch.nn.Module.__call__
    monkeypatch.setattr(torch.nn.Module, "__call__",
                        lambda self, *a, **k: calls.append(type(self)) or real(self, *a, **k))
    rc = main(argv)
    err = capsys.readouterr().err
    assert rc == 2, err
    assert err.startswith("hookscope: error: ") and err.count("\n") == 1, err
    assert words in err and "drop" in err
    assert not calls


def test_a_metric_with_no_signal_is_refused_before_a_ray_pool_starts(capsys, monkeypatch):
    from hookscope.app import sweep_cli

    pools = []
    real = sweep_cli.open_ray_pool
    monkeypatch.setattr(sweep_cli, "open_ray_pool", lambda ns: pools.append(ns) or real(ns))
    rc = main(CNN + ["--metric", "kl", "--ray", "local", "--ray-workers", "1"])
    err = capsys.readouterr().err
    assert rc == 2, err
    assert err.startswith("hookscope: error: ") and err.count("\n") == 1, err
    assert "gradient is zero" in err and "drop --estimate" in err
    assert not pools


def test_integer_outputs_are_refused_in_one_line(tmp_path, capsys):
    f = tmp_path / "ints.py"
    f.write_text("import torch\nfrom torch import nn\n\n\n"
                 "class Ints(nn.Module):\n"
                 "    def __init__(self):\n        super().__init__()\n"
                 "        self.fc = nn.Linear(4, 3)\n\n"
                 "    def forward(self, x):\n        return self.fc(x).argmax(-1, keepdim=True)\n\n\n"
                 "def make():\n    return Ints(), torch.ones(1, 4)\n")
    rc = main(["sweep", f"{f}:make", "--over", "u=0:2", "--intervene", "fc=zero@units={u}",
               "--metric", "logit:#0", "--estimate"])
    err = capsys.readouterr().err
    assert rc == 2, err
    last = err.splitlines()[-1]  # after the announcement: refused in one line
    assert err.count("error") == 1 and last.startswith("hookscope: error: ")
    assert "integer outputs" in last and "drop --estimate" in last


def test_a_backward_over_the_budget_is_refused_before_it_runs():
    cnn = load_model("demo:cnn")
    grads = []
    h = cnn.module.conv1.register_full_backward_hook(lambda *a: grads.append(1))
    try:
        with pytest.raises(EstimateRefused, match="memory budget"):
            sweep(cnn.module, cnn.example_input, {"u": "0:2"}, {"conv1": "zero@units={u}"},
                  "prob:#3", meaning=cnn.meaning, estimate=True, estimate_budget=16)
    finally:
        h.remove()
    assert not grads


def test_the_budget_refuses_exactly_where_twice_the_leaf_outputs_pass_it():
    """The memory check runs as the forward with gradients goes (the baseline is that
    forward): a budget one byte under twice every leaf module's output of a plain forward
    is refused naming that figure, with no backward run; the figure itself is enough."""
    cnn = load_model("demo:cnn")
    sizes = []
    leaves = [m for m in cnn.module.modules() if next(m.children(), None) is None]
    hs = [m.register_forward_hook(lambda m, a, out: sizes.append(out.numel() * out.element_size()))
          for m in leaves]
    try:
        with torch.inference_mode():
            cnn.module(cnn.example_input)
    finally:
        for h in hs:
            h.remove()
    need = 2 * sum(sizes)
    args = (cnn.module, cnn.example_input, {"u": "0:2"}, {"conv1": "zero@units={u}"}, "prob:#3")
    grads = []
    h = cnn.module.conv1.register_full_backward_hook(lambda *a: grads.append(1))
    try:
        with pytest.raises(EstimateRefused, match="memory budget") as refused:
            sweep(*args, meaning=cnn.meaning, estimate=True, estimate_budget=need - 1)
    finally:
        h.remove()
    assert not grads
    assert f"about {need / 2**20:.0f} MiB" in str(refused.value)
    res = sweep(*args, meaning=cnn.meaning, estimate=True, estimate_budget=need)
    assert np.isfinite(res.estimates).all() and np.ptp(res.estimates) > 0
    assert res.forwards["baseline"] == 0 and res.forwards["gradient"] == 1
