"""``hookscope sweep`` and sweep() as an attacker would drive them: axes that match nothing or
span a billion cells, templates that try to reach attributes or name no axis, files it must not
overwrite. Each is refused in one line with status 2 before any forward runs; an interrupted
sweep leaves no hook behind; a CSV is written whole or not at all, with no formula in it."""

from __future__ import annotations

import csv
import io
import time
import tracemalloc

import numpy as np
import pytest

from hookscope.app.cli import main
from hookscope.core import load_model
from hookscope.core.analyses import SweepResult, sweep

CNN = ["sweep", "demo:cnn"]
LM = ["sweep", "demo:lm", "--input", "text:the cat sat on the "]


@pytest.mark.parametrize("argv, words", [
    (CNN + ["--over", "layer=nothing.*", "--intervene", "{layer}=zero"], "matches no layer"),
    (CNN + ["--over", "a=0:100000", "--over", "b=0:10000", "--intervene", "fc=scale:{a}{b}"],
     "1,000,000,000 cells, over the limit of 10,000"),
    (CNN + ["--over", "a=linspace(0,1,1000000000)", "--intervene", "fc=scale:{a}"],
     "1,000,000,000 cells"),
    (CNN + ["--over", "layer=conv1", "--intervene", "{layer}=scale:{layer.__class__}"],
     "names no sweep axis"),
    (CNN + ["--over", "layer=conv1", "--intervene", "{layer}=zero@units={0}"], "names no sweep axis"),
    (CNN + ["--over", "layer=conv1", "--intervene", "{layer}=scale:{}"], "names no sweep axis"),
    (CNN + ["--over", "layer=conv1", "--intervene", "{layer=zero"], "appears in no template"),
    (CNN + ["--over", "layer=conv1", "--intervene", "{layer}=zap"], "zap"),
    (CNN + ["--over", "layer=conv1", "--intervene", "{layer}"], "write LAYER=KIND"),
    (CNN + ["--over", "layer", "--intervene", "{layer}=zero"], "write AXIS=VALUES"),
    (CNN + ["--over", "u=0:2", "--over", "u=0:3", "--intervene", "fc=zero@units={u}"], "twice"),
    (CNN + ["--over", "u=0:2", "--intervene", "fc=zero@units={u}", "--max-cells", "0"],
     "positive number"),
    (CNN + ["--over", "u=0:2", "--intervene", "fc=zero@units={u}", "--metric", "entropy"],
     "use one of"),
    (CNN + ["--over", "u=0:2", "--intervene", "fc=zero@units={u}", "--metric", "logit-diff:#1"],
     "logit-diff:A,B"),
    (CNN + ["--over", "pos=all", "--intervene", "fc=zero@pos={pos}"], "needs token ids"),
    (CNN + ["--over", "u=5:5", "--intervene", "fc=zero@units={u}"], "has no values"),
    (CNN + ["--over", "u=0:2:0", "--intervene", "fc=zero@units={u}"], "step cannot be 0"),
    (LM + ["--over", "layer=blocks.*", "--intervene", "{layer}=patch"], "source input"),
    (LM + ["--over", "u=0:2", "--intervene", "blocks.0=zero@units={u}", "--metric", "prob:cat"],
     "not one"),
])
def test_hostile_sweeps_are_one_line_before_any_forward(argv, words, capsys, monkeypatch):
    import torch

    calls = []
    real = torch.nn.Module.__call__
    monkeypatch.setattr(torch.nn.Module, "__call__",
                        lambda self, *a, **k: calls.append(type(self)) or real(self, *a, **k))
    tracemalloc.start()
    t0 = time.perf_counter()
    try:
        rc = main(argv)
    finally:
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    err = capsys.readouterr().err
    assert rc == 2, err
    assert err.startswith("hookscope: error: ") and err.count("\n") == 1, err
    assert words in err
    assert "sweep of" not in err  # refused before the number of runs was stated
    assert not calls  # no forward ran (not even the model's own modules)
    assert peak < 20 * 2**20 and time.perf_counter() - t0 < 10  # a billion cells cost nothing


def test_csv_never_overwrites_an_input_and_keeps_an_old_file_when_refused(tmp_path, capsys):
    x = tmp_path / "x.npy"
    np.save(x, np.zeros((1, 1, 8, 8), dtype=np.float32))
    rc = main(CNN + ["--input", str(x), "--over", "u=0:2", "--intervene", "fc=zero@units={u}",
                     "--csv", str(x)])
    assert rc == 2 and "would overwrite" in capsys.readouterr().err
    assert np.load(x).shape == (1, 1, 8, 8)
    old = tmp_path / "old.csv"
    old.write_text("kept\n")
    rc = main(CNN + ["--over", "u=0:2", "--intervene", "fc=zero@units={u}", "--metric", "prob:#99",
                     "--csv", str(old)])
    assert rc == 2 and "outside the 10 scores" in capsys.readouterr().err
    assert old.read_text() == "kept\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["old.csv", "x.npy"]  # no temp file left
    rc = main(CNN + ["--over", "u=0:2", "--intervene", "fc=zero@units={u}", "--csv",
                     str(tmp_path / "missing" / "a.csv")])
    assert rc == 2 and "does not exist" in capsys.readouterr().err


def test_csv_labels_never_read_as_formulas():
    res = SweepResult(np.array([1.5, -2.0]), {"tag": ["=HYPERLINK(\"x\")", "-3"]},
                      {"tag": ["a", "b"]}, "kl", None, {})
    rows = list(csv.reader(io.StringIO(res.to_csv())))
    assert rows == [["tag", "kl"], ["'=HYPERLINK(\"x\")", "1.5"], ["-3", "-2.0"]]


@pytest.mark.parametrize("where", ["between cells", "inside a forward"])
def test_an_interrupted_sweep_leaves_no_hook_and_the_model_as_it_was(where):
    import torch

    lm = load_model("demo:lm")
    module = lm.module
    x = torch.tensor([lm.meaning.codec.encode("the cat sat on the ")])
    with torch.no_grad():
        before = module(x).clone()
    n = [0]

    def stop() -> bool:
        n[0] += 1
        if n[0] == 40:
            raise KeyboardInterrupt
        return False

    def progress(done: int, total: int) -> None:
        if done == 3:
            raise KeyboardInterrupt

    kw = {"progress": progress} if where == "between cells" else {"should_stop": stop}
    with pytest.raises(KeyboardInterrupt):
        sweep(module, x, {"layer": "blocks.*", "pos": "all"},
              {"{layer}": "patch:text:the dog sat on the @pos={pos}"}, "kl", meaning=lm.meaning,
              **kw)
    for m in module.modules():
        assert not m._forward_hooks and not m._forward_pre_hooks
    with torch.no_grad():
        assert torch.equal(module(x), before)


def test_save_plots_refused_before_any_forward_and_never_over_an_input(tmp_path, capsys):
    plots = tmp_path / "plots"
    plots.mkdir()
    labels = plots / "sweep_curve.png"  # a file the command reads, where the plot would go
    labels.write_text("\n".join(str(i) for i in range(10)) + "\n")
    rc = main(CNN + ["--labels", str(labels), "--over", "u=0:2", "--intervene",
                     "fc=zero@units={u}", "--save-plots", str(plots)])
    err = capsys.readouterr().err
    assert rc == 2 and "would overwrite" in err and "sweep of" not in err
    assert labels.read_text().startswith("0\n1\n")
    rc = main(CNN + ["--over", "a=0:2", "--over", "b=0:2", "--over", "c=0:2", "--intervene",
                     "fc=scale:{a}{b}{c}", "--save-plots", str(plots)])
    err = capsys.readouterr().err
    assert rc == 2 and "one axis (a curve) or two" in err and "sweep of" not in err
    afile = tmp_path / "a_file"
    afile.write_text("x")
    rc = main(CNN + ["--over", "u=0:2", "--intervene", "fc=zero@units={u}", "--save-plots",
                     str(afile)])
    assert rc == 2 and "cannot create the folder" in capsys.readouterr().err
    assert afile.read_text() == "x"
    assert main(CNN + ["--over", "u=0:2", "--intervene", "fc=zero@units={u}", "--batch",
                       "0"]) == 2
    assert "--batch 0" in capsys.readouterr().err


def test_save_plots_replaces_a_link_not_its_target_and_draws_hostile_labels(tmp_path, capsys):
    plots = tmp_path / "plots"
    plots.mkdir()
    target = tmp_path / "precious.txt"
    target.write_text("keep me")
    (plots / "sweep_curve.png").symlink_to(target)
    # labels with control characters and a huge length are drawn, shortened, not executed
    rc = main(CNN + ["--over", "f=1e300,-1e300,0", "--intervene", "conv2=scale:{f}",
                     "--save-plots", str(plots)])
    assert rc == 0, capsys.readouterr().err
    assert target.read_text() == "keep me"
    out = plots / "sweep_curve.png"
    assert not out.is_symlink() and out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert sorted(p.name for p in plots.iterdir()) == ["sweep_curve.png"]  # no temp file left
