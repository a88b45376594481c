"""``hookscope scan``: its JSON, CSV and table equal scan()'s; mistakes are one line."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import torch

from hookscope.app.cli import main
from hookscope.core import load_model
from hookscope.core.analyses import ScanRequest, scan
from hookscope.core.dataset import open_inputs

DIGITS = Path(__file__).resolve().parents[2] / "resources" / "digits_test.safetensors"


def test_digits_json_and_csv_equal_the_api(tmp_path, capsys):
    out_csv = tmp_path / "effect.csv"
    rc = main(["scan", "demo:cnn", "--inputs", str(DIGITS), "--capture", "conv1",
               "--intervene", "conv2=zero:3", "--unit", "conv2:3", "--top-k", "9", "--json",
               "--csv", str(out_csv)])
    cap = capsys.readouterr()
    assert rc == 0, cap.err
    assert cap.err.startswith("hookscope: scan of 200 inputs from digits_test.safetensors")
    got = json.loads(cap.out)
    lm = load_model("demo:cnn")
    want = scan(lm, ScanRequest(open_inputs(DIGITS), ("conv1", "conv2"), {"conv2": "zero:3"}))
    assert got["count"] == 200 and got["metric"] == "prob:label"
    assert got["accuracy_without"] == want.accuracy(False)
    assert got["accuracy_with"] == want.accuracy(True)
    assert got["changed_fraction"] == want.changed_fraction
    assert got["per_class"] == want.per_class()
    assert set(got["layers"]) == {"conv1", "conv2"}
    assert [t["index"] for t in got["top"]["conv2"]["3"]] == \
           [t.index for t in want.top_inputs("conv2", 3)]
    assert np.allclose(got["layers"]["conv2"]["unit_mean"], want.layer("conv2").unit_mean)
    rows = list(csv.reader(out_csv.read_text().splitlines()))
    assert rows[0][:3] == ["index", "input", "label"] and len(rows) == 201
    assert [int(r[3]) for r in rows[1:]] == [r.pred_without for r in want.rows]
    assert [int(r[4]) for r in rows[1:]] == [r.pred_with for r in want.rows]


def test_text_table_names_the_activating_token(tmp_path, capsys):
    f = tmp_path / "p.txt"
    f.write_text("the cat sat on the\nhello world\n")
    rc = main(["scan", "demo:lm", "--inputs", str(f), "--unit", "blocks.0:5",
               "--intervene", "blocks.0=zero"])
    cap = capsys.readouterr()
    assert rc == 0, cap.err
    lm = load_model("demo:lm")
    want = scan(lm, ScanRequest(open_inputs(f), ("blocks.0",), {"blocks.0": "zero"}))
    top = want.top_inputs("blocks.0", 5)[0]
    assert f"token {top.position} {top.tokens[top.position]!r}" in cap.out
    assert "top prediction changed on" in cap.out and "metric kl" in cap.out


def test_mistakes_are_one_line(tmp_path, capsys):
    for argv, words in [
        (["demo:cnn", "--inputs", str(DIGITS), "--unit", "conv2"], "LAYER:INDEX"),
        (["demo:cnn", "--inputs", str(DIGITS), "--unit", "conv2:99"], "out of range"),
        (["demo:cnn", "--inputs", str(DIGITS), "--capture", "nope"], "nope"),
        (["demo:cnn", "--inputs", str(DIGITS), "--intervene", "conv2=zero:99"], "out of range"),
        (["demo:cnn", "--inputs", str(DIGITS), "--top-k", "0"], "--top-k"),
        (["demo:cnn", "--inputs", str(DIGITS), "--csv", str(tmp_path / "no" / "x.csv")],
         "does not exist"),
        (["demo:cnn", "--inputs", str(DIGITS), "--metric", "prob:label", "--limit", "0"],
         "--limit"),
    ]:
        rc = main(["scan", *argv])
        err = capsys.readouterr().err
        assert rc == 2, (argv, err)
        last = err.splitlines()[-1]
        assert last.startswith("hookscope: error: ") and words in last, (argv, err)
        assert "Traceback" not in err


def test_sae_kinds_scan_with_the_sae_attached_by_sae(tmp_path, capsys):
    """--sae attaches the SAE before the scan, as hookscope run does: sae-ablate works."""
    from hookscope.core import attach_sae

    f = tmp_path / "p.txt"
    f.write_text("the cat sat on the\nthe dog sat on the\n")
    out_csv = tmp_path / "e.csv"
    rc = main(["scan", "demo:lm", "--inputs", str(f), "--sae", "blocks.0=demo",
               "--intervene", "blocks.0=sae-ablate:12,40", "--csv", str(out_csv)])
    cap = capsys.readouterr()
    assert rc == 0, cap.err
    lm = load_model("demo:lm")
    attach_sae(lm.module, "blocks.0", "demo")
    want = scan(lm, ScanRequest(open_inputs(f), (), {"blocks.0": "sae-ablate:12,40"}))
    assert out_csv.read_text() == want.to_csv()
    rows = list(csv.reader(out_csv.read_text().splitlines()))
    assert rows[0][6] == "kl_with" and all(float(r[6]) > 0 for r in rows[1:])   # it did something
    # without it: one line saying what to add
    rc = main(["scan", "demo:lm", "--inputs", str(f), "--intervene", "blocks.0=sae-ablate:12"])
    err = capsys.readouterr().err
    assert rc == 2 and "Traceback" not in err and "--sae" in err.splitlines()[-1]


def test_top_inputs_say_where_on_the_feature_map_and_their_label(capsys):
    """A conv unit's top inputs: (y, x) on its feature map (not a flat index), the input's
    label, and no name that only repeats its number."""
    rc = main(["scan", "demo:cnn", "--inputs", str(DIGITS), "--unit", "conv2:3", "--top-k", "3"])
    cap = capsys.readouterr()
    assert rc == 0, cap.err
    lm = load_model("demo:cnn")
    want = scan(lm, ScanRequest(open_inputs(DIGITS), ("conv2",), {}))
    shapes = []
    h = lm.module.get_submodule("conv2").register_forward_hook(
        lambda m, a, o: shapes.append(tuple(o.shape[2:])))
    with torch.no_grad():
        lm.module(open_inputs(DIGITS).item(0))
    h.remove()
    labels = {r.index: r.label for r in want.rows}
    lines = cap.out.split("top inputs of conv2 unit 3:\n", 1)[1].splitlines()[:3]
    for rank, (t, line) in enumerate(zip(want.top_inputs("conv2", 3), lines), 1):
        y, x = np.unravel_index(t.position, shapes[0])
        assert line == f"  {rank:>2}. #{t.index:<6} {t.value:.6g}  at ({y}, {x})  label {labels[t.index]}"
