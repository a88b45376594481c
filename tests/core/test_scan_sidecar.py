"""A session's scan saved beside the session file and read back: the restored result gives
the same JSON summary, top inputs and per-input CSV as the scan that was run, for an image
set and a text set; saving never replaces a file that is not a saved scan."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from hookscope.core import HookscopeError, Session, load_model
from hookscope.core.analyses import ScanRequest, scan, scan_from_data, scan_to_data
from hookscope.core.dataset import open_inputs
from hookscope.core.session import SIDECAR_SUFFIX, SavedScan, read_session_file

DIGITS = Path(__file__).resolve().parents[2] / "resources" / "digits_test.safetensors"
TOPS = {"conv2": [0, 3, 7], "fc": [1, 9]}


@pytest.fixture(scope="module")
def cnn():
    return load_model("demo:cnn")


@pytest.fixture(scope="module")
def digits_scan(cnn):
    return scan(cnn, ScanRequest(open_inputs(DIGITS), capture=("conv2", "fc"),
                                 intervene={"conv2": "zero:3"}, top_k=5, limit=60))


def _saved(cnn, result, folder: Path, unit: str = "conv2:3") -> Path:
    s = Session.offline(cnn)
    s.saved_scan = SavedScan(result, unit)
    return s.save(folder / "run.hookscope.json")


def test_the_data_round_trip_equals_the_scan(digits_scan):
    back = scan_from_data(json.loads(json.dumps(scan_to_data(digits_scan))))
    assert back.to_json_dict(TOPS) == digits_scan.to_json_dict(TOPS)
    assert back.to_csv() == digits_scan.to_csv()
    for path, s in digits_scan.layers.items():
        np.testing.assert_array_equal(back.layers[path].top_index, s.top_index)
        np.testing.assert_array_equal(back.layers[path].top_values, s.top_values)
        np.testing.assert_array_equal(back.layers[path].unit_mean, s.unit_mean)
    assert back.changed_fraction == digits_scan.changed_fraction


def test_a_saved_session_names_its_sidecar_and_reopens_the_scan(cnn, digits_scan, tmp_path):
    path = _saved(cnn, digits_scan, tmp_path)
    entry = json.loads(path.read_text())["scan"]
    side = tmp_path / ("run" + SIDECAR_SUFFIX)
    assert entry["file"] == side.name and side.is_file()
    assert b"pickle" not in side.read_bytes() and json.loads(side.read_text())["unit"] == "conv2:3"
    setup = read_session_file(path)
    assert setup.scan_note is None and setup.scan is not None and setup.scan.unit == "conv2:3"
    got = setup.scan.result
    assert got.to_json_dict(TOPS) == digits_scan.to_json_dict(TOPS)
    assert got.to_csv() == digits_scan.to_csv()
    assert [(t.index, t.value, t.name) for t in got.top_inputs("conv2", 3)] == \
           [(t.index, t.value, t.name) for t in digits_scan.top_inputs("conv2", 3)]
    # The folder moves whole: the sidecar is named relative to the session.
    moved = tmp_path / "moved"
    moved.mkdir()
    for f in (path, side):
        f.rename(moved / f.name)
    assert read_session_file(moved / path.name).scan is not None


def test_a_text_scan_keeps_its_top_inputs_texts(tmp_path):
    lm = load_model("demo:lm")
    f = tmp_path / "p.txt"
    f.write_text("the cat sat on the mat\nhello world\nthe dog ran off\n")
    res = scan(lm, ScanRequest(open_inputs(f), capture=("blocks.1",), top_k=2))
    back = scan_from_data(json.loads(json.dumps(scan_to_data(res))))
    tops = {"blocks.1": [0, 7]}
    assert back.to_json_dict(tops) == res.to_json_dict(tops)
    want = res.top_inputs("blocks.1", 7, codec=lm.meaning.codec)
    got = back.top_inputs("blocks.1", 7, codec=lm.meaning.codec)
    assert [(t.index, t.tokens) for t in got] == [(t.index, t.tokens) for t in want]
    with pytest.raises(HookscopeError, match="Open inputs"):
        back.inputs.item(0)


def test_session_scan_is_kept_and_saved(tmp_path):
    s = Session.load("demo:cnn")
    try:
        res = s.scan(DIGITS, capture=("fc",), limit=20)
        assert s.saved_scan is not None and s.saved_scan.result is res
        path = s.save(tmp_path / "s.hookscope.json")
    finally:
        s.close()
    again = Session.open_file(path)
    try:
        assert again.saved_scan is not None and again.saved_scan.result.to_csv() == res.to_csv()
    finally:
        again.close()


def test_saving_never_replaces_a_file_that_is_not_a_saved_scan(cnn, digits_scan, tmp_path):
    side = tmp_path / ("run" + SIDECAR_SUFFIX)
    side.write_text("my notes\n")
    with pytest.raises(HookscopeError, match="is not a saved scan"):
        _saved(cnn, digits_scan, tmp_path)
    assert side.read_text() == "my notes\n" and not (tmp_path / "run.hookscope.json").exists()
    side.unlink()
    path = _saved(cnn, digits_scan, tmp_path)  # an earlier saved scan is replaced
    first = json.loads(path.read_text())["scan"]["sha256"]
    path = _saved(cnn, digits_scan, tmp_path, unit="fc:1")
    assert json.loads(path.read_text())["scan"]["sha256"] != first
    assert read_session_file(path).scan.unit == "fc:1"
