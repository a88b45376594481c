"""``hookscope run`` lists every tensor leaf of a nested layer output: table rows and JSON."""

import io
import json
import sys
from pathlib import Path

import numpy as np
import pytest

from hookscope.app.headless import run_command

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "core"))
import nested_models  # noqa: E402
from nested_models import LSTMNet, make, run_hand  # noqa: E402

SPEC = f"{nested_models.PATH}:lstm"


def run(argv):
    out = io.StringIO()
    assert run_command(argv, out) == 0
    return out.getvalue()


def test_table_has_a_row_per_leaf_with_torchs_numbers():
    text = run([SPEC, "--capture", "inner", "--clamp", "inner=-0.2:0.3"])
    model, x = make(LSTMNet)
    _, pre, post, _ = run_hand(model, "inner", x, lambda t: t.clamp(-0.2, 0.3))
    lines = text.splitlines()
    for leaf, t in post.items():
        name = "inner" if leaf == "[0]" else f"inner{leaf}"
        (i,) = [i for i, ln in enumerate(lines) if ln.split()[:1] == [name]]
        cells = lines[i].split()
        assert cells[1:4] == ["0", "with", "x".join(map(str, t.shape))]
        got = [float(c) for c in cells[4:8]]
        want = [float(f"{v:.4g}") for v in (t.min(), t.max(), t.double().mean(),
                                            t.double().std(correction=0))]
        assert got == pytest.approx(want, rel=2e-3, abs=2e-4)
        without = lines[i + 1].split()  # the baseline row of the same leaf below it
        assert without[0] == "without"
        assert float(without[1]) == pytest.approx(float(f"{pre[leaf].min():.4g}"), rel=2e-3, abs=2e-4)


def test_json_and_saved_captures_list_every_leaf(tmp_path):
    saved = tmp_path / "c.npz"
    d = json.loads(run([SPEC, "--capture", "inner", "--clamp", "inner=-0.2:0.3", "--json",
                        "--save-captures", str(saved)]))
    model, x = make(LSTMNet)
    _, pre, post, _ = run_hand(model, "inner", x, lambda t: t.clamp(-0.2, 0.3))
    rec = d["captures"]["inner"][0]
    assert rec["leaf"] == "[0]" and list(rec["other_leaves"]) == ["[1][0]", "[1][1]"]
    for leaf, got in [("[0]", rec), *rec["other_leaves"].items()]:
        assert got["shape"] == list(post[leaf].shape)
        assert got["max"] == pytest.approx(float(post[leaf].max()))
        assert got["fraction_changed"] == pytest.approx(float((pre[leaf] != post[leaf]).double().mean()))
    arrays = np.load(saved)
    np.testing.assert_array_equal(arrays["inner#0[1][0]"], post["[1][0]"].numpy())
    np.testing.assert_array_equal(arrays["inner#0"], post["[0]"].numpy())
