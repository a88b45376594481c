"""``hookscope sweep --estimate [--verify K]``: the estimates and verified cells as JSON, a
CSV and a table, equal to sweep(..., estimate=True, verify=K) and, for the verified cells,
to the exact sweep."""

from __future__ import annotations

import csv
import json

import numpy as np

from hookscope.app.cli import main
from hookscope.core import load_model, parse_input
from hookscope.core.analyses import sweep

PROMPT = "text:the cat sat on the "
SOURCE = "text:the dog sat on the "
METRIC = "logit-diff:' ',t"
ARGS = ["sweep", "demo:lm", "--input", PROMPT, "--over", "layer=blocks.*", "--over", "pos=all",
        "--intervene", "{layer}=patch@pos={pos}", "--source-input", SOURCE, "--metric", METRIC]


def _api(**kw):
    lm = load_model("demo:lm")
    x = parse_input(PROMPT, lm.example_input, lm.meaning.codec)
    return sweep(lm.module, x, {"layer": "blocks.*", "pos": "all"},
                 {"{layer}": f"patch:{SOURCE}@pos={{pos}}"}, METRIC, meaning=lm.meaning, **kw)


def test_estimate_with_verify_json_and_csv(tmp_path, capsys):
    out_csv = tmp_path / "grid.csv"
    rc = main(ARGS + ["--estimate", "--verify", "3", "--json", "--csv", str(out_csv)])
    cap = capsys.readouterr()
    assert rc == 0, cap.err
    assert "estimating" in cap.err and "sweep of" not in cap.err
    got = json.loads(cap.out)
    want = _api(estimate=True, verify=3)
    exact = _api()
    est = np.array(got["estimates"], dtype=float)
    np.testing.assert_array_equal(est, want.estimates)
    ver = got["verified"]
    assert len(ver["cells"]) == 3 and ver["cells"] == want.verified["cells"]
    assert ver["values"] == [exact.values[tuple(c)] for c in ver["cells"]]
    assert ver["estimates"] == [want.estimates[tuple(c)] for c in ver["cells"]]
    assert ver["spearman"] == want.verified["spearman"]
    values = np.array(got["values"], dtype=object)
    assert sum(v is not None for v in values.reshape(-1)) == 3  # null where not verified
    rows = list(csv.reader(out_csv.read_text().splitlines()))
    assert rows[0] == ["layer", "pos", "pos_index", METRIC, "estimate"]
    assert [float(r[4]) for r in rows[1:]] == want.estimates.reshape(-1).tolist()
    assert sum(1 for r in rows[1:] if r[3]) == 3


def test_estimate_table_marks_estimates_and_lists_verified_cells(capsys):
    rc = main(ARGS + ["--estimate", "--verify", "2"])
    cap = capsys.readouterr()
    assert rc == 0, cap.err
    assert cap.out.startswith(f"estimated (first order) metric {METRIC}")
    assert "verified 2 cells (run for real)" in cap.out
    assert cap.out.count(" actual ") == 2


def test_verify_without_estimate_is_one_line(capsys):
    rc = main(ARGS + ["--verify", "2"])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and "--estimate" in err


def test_inputs_and_residual_names_from_the_command_line(capsys):
    """--over layer=resid_pre.* and LAYER:input in run's --capture/--intervene: the same
    numbers as the paths they name."""
    named = ["sweep", "demo:lm", "--input", PROMPT, "--over", "layer=resid_pre.*", "--over",
             "pos=3:6", "--intervene", "{layer}=patch@pos={pos}", "--source-input", SOURCE,
             "--metric", METRIC, "--json", "--batch", "1"]
    assert main(named) == 0
    got = json.loads(capsys.readouterr().out)
    assert main([*named[:5], "layer=blocks.0:input,blocks.1:input", *named[6:]]) == 0
    want = json.loads(capsys.readouterr().out)
    assert got["axes"]["layer"] == ["resid_pre.0", "resid_pre.1"]
    assert got["values"] == want["values"]
    rc = main(["run", "demo:lm", "--input", PROMPT, "--capture", "blocks.1.ln2:input",
               "--intervene", "blocks.1:input=scale:0.5", "--json"])
    cap = capsys.readouterr()
    assert rc == 0, cap.err
    out = json.loads(cap.out)
    assert "blocks.1.ln2:input" in json.dumps(out)


def test_save_plots_of_an_estimate_draws_every_cell(tmp_path, capsys):
    from PySide6.QtGui import QColor, QImage

    rc = main(ARGS + ["--estimate", "--save-plots", str(tmp_path / "plots")])
    cap = capsys.readouterr()
    assert rc == 0, cap.err
    img = QImage(str(tmp_path / "plots" / "sweep_heatmap.png"))
    assert not img.isNull()
    colours = {img.pixel(x, y) for x in range(0, img.width(), 5) for y in range(0, img.height(), 5)}
    assert len(colours) > 8  # the estimates, not grey cells for values never run
    grey = QColor(150, 150, 150).rgb()
    assert sum(c == grey for c in colours) == 0
