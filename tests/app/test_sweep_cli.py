"""``hookscope sweep``: the grid's numbers equal sweep()'s (and so each cell's compare()),
as JSON, a CSV and a table; the number of runs comes on stderr first."""

from __future__ import annotations

import csv
import json

import numpy as np
import torch

from hookscope.app.cli import main
from hookscope.core import Add, compare, load_model, parse_input, Plan
from hookscope.core.analyses import sweep
from hookscope.core.analyses.sweep_metrics import make_metric

PROMPT = "text:the cat sat on the "
SOURCE = "text:the dog sat on the "


def test_patching_grid_json_and_csv_equal_the_api(tmp_path, capsys):
    out_csv = tmp_path / "grid.csv"
    rc = main(["sweep", "demo:lm", "--input", PROMPT, "--over", "layer=blocks.*", "--over",
               "pos=all", "--intervene", "{layer}=patch@pos={pos}", "--source-input", SOURCE,
               "--metric", "kl", "--json", "--csv", str(out_csv)])
    cap = capsys.readouterr()
    assert rc == 0, cap.err
    lm = load_model("demo:lm")
    x = parse_input(PROMPT, lm.example_input, lm.meaning.codec)
    n = x.shape[-1]
    assert cap.err.startswith(f"hookscope: sweep of {2 * n} cells (2 layer x {n} pos)")
    got = json.loads(cap.out)
    want = sweep(lm.module, x, {"layer": "blocks.*", "pos": "all"},
                 {"{layer}": f"patch:{SOURCE}@pos={{pos}}"}, "kl", meaning=lm.meaning)
    assert got["axes"] == want.axes and got["metric"] == "kl" and got["baseline"] is None
    assert np.array_equal(np.array(got["values"]), want.values)
    # positions: the label ("3 't'") and the integer, in JSON and in the CSV
    assert got["coords"] == {"pos": list(range(n))}
    rows = list(csv.reader(out_csv.read_text().splitlines()))
    assert rows[0] == ["layer", "pos", "pos_index", "kl"] and len(rows) == 2 * n + 1
    assert [r[1] for r in rows[1:n + 1]] == want.axes["pos"]
    assert [int(r[2]) for r in rows[1:n + 1]] == list(range(n))
    assert [float(r[3]) for r in rows[1:]] == want.values.reshape(-1).tolist()


def test_a_value_of_minus_zero_is_written_zero(tmp_path, capsys):
    """A cell whose metric is exactly -0.0 is written 0 in the table, the CSV and JSON."""
    import io

    from hookscope.app.sweep_cli import print_grid
    from hookscope.core.analyses import SweepResult

    res = SweepResult(np.array([[-0.0, 1.5], [0.25, -0.0]]), {"layer": ["a", "b"], "pos": ["0 'x'", "1 'y'"]},
                      {"layer": ["a", "b"], "pos": [0, 1]}, "kl", None, {})
    buf = io.StringIO()
    print_grid(res, buf)
    assert "-0" not in buf.getvalue() and buf.getvalue().splitlines()[2].split()[1:] == ["0", "1.5"]
    assert "-0" not in res.to_csv() and res.to_csv().splitlines()[1] == "a,0 'x',0,0.0"
    assert json.dumps(res.to_json_dict()["values"]) == "[[0.0, 1.5], [0.25, 0.0]]"


def test_add_steering_curve_from_the_command_line(tmp_path, capsys):
    lm = load_model("demo:lm")
    x = parse_input(PROMPT, lm.example_input, lm.meaning.codec)
    width = []
    h = lm.module.get_submodule("blocks.1").register_forward_hook(
        lambda m, a, o: width.append(o.shape[-1]))
    with torch.no_grad():
        lm.module(x)
    h.remove()
    v = torch.randn(width[0], generator=torch.Generator().manual_seed(1))
    torch.save(v, tmp_path / "v.pt")
    rc = main(["sweep", "demo:lm", "--input", PROMPT, "--over", "alpha=linspace(0,8,5)",
               "--intervene", "blocks.1=add:v:{alpha}", "--vector", f"v={tmp_path / 'v.pt'}",
               "--metric", "logit-diff:' ',t", "--json"])
    cap = capsys.readouterr()
    assert rc == 0, cap.err
    got = json.loads(cap.out)
    assert got["axes"] == {"alpha": ["0.0", "2.0", "4.0", "6.0", "8.0"]}
    m = make_metric("logit-diff:' ',t", lm.meaning)
    for k, a in enumerate([0.0, 2.0, 4.0, 6.0, 8.0]):
        r = compare(lm.module, x, Plan(interventions={"blocks.1": Add(v, a)}))
        assert got["values"][k] == m.cell(r.output_without, r.output_with)
    assert got["baseline"] == got["values"][0]


def test_table_names_layers_and_units(capsys):
    rc = main(["sweep", "demo:cnn", "--over", "layer=conv*", "--over", "unit=0:3",
               "--intervene", "{layer}=zero@units={unit}", "--metric", "top-changed"])
    cap = capsys.readouterr()
    assert rc == 0, cap.err
    lines = cap.out.splitlines()
    assert lines[0] == "metric top-changed"
    assert [ln.split()[0] for ln in lines[2:]] == ["conv1", "conv2"]
    assert lines[1].split() == ["0", "1", "2"]


def test_normalise_and_batch_options_in_the_json(capsys):
    argv = ["sweep", "demo:lm", "--input", PROMPT, "--over", "layer=blocks.*", "--over",
            "pos=15:19", "--intervene", "{layer}=patch@pos={pos}", "--source-input", SOURCE,
            "--metric", "logit-diff:' ',t", "--normalise", "--json"]
    assert main(argv + ["--batch", "1"]) == 0
    cap = capsys.readouterr()
    one = json.loads(cap.out)
    assert one["batched"]["cells"] == 0 and "switched off" in one["batched"]["note"]
    assert "0 of 8 cells batched: batching was switched off" in cap.err
    assert main(argv) == 0
    both = json.loads(capsys.readouterr().out)
    assert both["batched"] == {"cells": 8, "rows": 9, "forwards": 1, "note": None}
    lm = load_model("demo:lm")
    x = parse_input(PROMPT, lm.example_input, lm.meaning.codec)
    want = sweep(lm.module, x, {"layer": "blocks.*", "pos": "15:19"},
                 {"{layer}": f"patch:{SOURCE}@pos={{pos}}"}, "logit-diff:' ',t",
                 meaning=lm.meaning, normalise=True)
    assert one["values"] == both["values"] == want.values.tolist()
    assert one["normalised"] == want.normalised
    assert main(argv[:-1]) == 0  # the table says what 0 and 1 are
    assert "normalised: 0 = clean" in capsys.readouterr().out.splitlines()[0]


def test_save_plots_writes_a_heat_map_and_a_curve(tmp_path, capsys):
    from PySide6.QtGui import QImage

    rc = main(["sweep", "demo:lm", "--input", PROMPT, "--over", "layer=blocks.*", "--over",
               "pos=all", "--intervene", "{layer}=patch@pos={pos}", "--source-input", SOURCE,
               "--metric", "kl", "--save-plots", str(tmp_path / "plots")])
    cap = capsys.readouterr()
    assert rc == 0, cap.err
    heat = tmp_path / "plots" / "sweep_heatmap.png"
    assert f"wrote {heat}" in cap.err
    img = QImage(str(heat))
    assert not img.isNull() and img.width() > 400 and img.height() > 100
    # the cells are coloured: more than a handful of distinct colours in the picture
    colours = {img.pixel(x, y) for x in range(0, img.width(), 7) for y in range(0, img.height(), 7)}
    assert len(colours) > 8
    rc = main(["sweep", "demo:cnn", "--over", "f=linspace(0,2,5)", "--intervene",
               "conv2=scale:{f}", "--metric", "kl", "--save-plots", str(tmp_path / "plots")])
    assert rc == 0
    curve = QImage(str(tmp_path / "plots" / "sweep_curve.png"))
    assert not curve.isNull() and curve.width() > 400
    assert sorted(p.name for p in (tmp_path / "plots").iterdir()) == ["sweep_curve.png",
                                                                     "sweep_heatmap.png"]


def test_sae_kinds_sweep_with_the_sae_attached_by_sae(capsys):
    """--sae attaches the SAE before the cells (as hookscope run does): a strength curve of
    sae-scale equals sweep() on the model with that SAE attached."""
    from hookscope.core import attach_sae

    rc = main(["sweep", "demo:lm", "--input", PROMPT, "--sae", "blocks.0=demo", "--over",
               "f=linspace(0,2,5)", "--intervene", "blocks.0=sae-scale:12={f}", "--metric", "kl",
               "--json"])
    cap = capsys.readouterr()
    assert rc == 0, cap.err
    lm = load_model("demo:lm")
    attach_sae(lm.module, "blocks.0", "demo")
    x = parse_input(PROMPT, lm.example_input, lm.meaning.codec)
    want = sweep(lm.module, x, {"f": "linspace(0,2,5)"}, {"blocks.0": "sae-scale:12={f}"}, "kl",
                 meaning=lm.meaning)
    got = json.loads(cap.out)
    np.testing.assert_allclose(got["values"], want.values, rtol=1e-6, atol=1e-9)
    assert got["values"][2] == 0   # factor 1 leaves the output as it was
    assert "--sae LAYER=DIR" in _help(capsys)


def _help(capsys) -> str:
    import pytest

    with pytest.raises(SystemExit):
        main(["sweep", "--help"])
    return capsys.readouterr().out
