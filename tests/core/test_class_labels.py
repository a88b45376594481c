"""Labels files name a classifier's classes: text and JSON forms, clear refusals,
the meaning they give, and a session file that keeps them."""

from __future__ import annotations

import json

import pytest
import torch

from hookscope.core import Session
from hookscope.core.model.class_labels import read_labels, with_labels
from hookscope.core.base.errors import InputError
from hookscope.core.base.meaning import CLASSES, DETECTIONS, GENERIC, TOKENS, OutputMeaning
from hookscope.core.views.outputs import describe_outputs

FACTORY = """\
import torch
from torch import nn

def make():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3)), torch.ones(1, 4)
"""


def test_text_and_json_forms_read_in_class_order(tmp_path):
    (tmp_path / "a.txt").write_text("tench\ngoldfish\n\nshark\n")
    assert read_labels(tmp_path / "a.txt") == ["tench", "goldfish", "", "shark"]
    (tmp_path / "b.json").write_text(json.dumps(["cat", "dog"]))
    assert read_labels(tmp_path / "b.json") == ["cat", "dog"]
    (tmp_path / "c.json").write_text(json.dumps({"0": "cat", "2": "fox"}))  # an id2label
    assert read_labels(tmp_path / "c.json") == ["cat", "1", "fox"]


@pytest.mark.parametrize("content, words", [
    ("", "empty"),
    ("[1, [2]]", "JSON list"),
    ('{"a": "cat"}', "class indices"),
    ("{not json", "not valid JSON"),
])
def test_a_bad_labels_file_is_refused_saying_what_is_wrong(tmp_path, content, words):
    f = tmp_path / "labels.json"
    f.write_text(content)
    with pytest.raises(InputError, match=words):
        read_labels(f)
    with pytest.raises(InputError, match="does not exist"):
        read_labels(tmp_path / "missing.txt")


def test_labels_make_a_generic_output_a_classifiers_and_keep_a_detectors_kind():
    assert with_labels(OutputMeaning(), ["a"]).kind == CLASSES
    det = with_labels(OutputMeaning(kind=DETECTIONS), ["bg", "car"])
    assert det.kind == DETECTIONS and det.labels == ["bg", "car"]
    with pytest.raises(InputError, match="drop --labels"):
        with_labels(OutputMeaning(kind=TOKENS), ["a"])
    assert OutputMeaning().kind == GENERIC


def test_named_top_classes_and_a_note_when_the_count_differs():
    a, b = torch.tensor([[3.0, 1.0, 0.0]]), torch.tensor([[0.0, 1.0, 3.0]])
    d = describe_outputs(a, b, with_labels(OutputMeaning(), ["cat", "dog", "fox"]))
    assert d["rows"][0]["top_without"][0]["label"] == "cat"
    assert d["rows"][0]["top_with"][0]["label"] == "fox" and d["rows"][0]["top_changed"]
    assert not d["notes"]
    short = describe_outputs(a, b, with_labels(OutputMeaning(), ["cat", "dog"]))
    assert any("name 2 classes but the output has 3" in n for n in short["notes"])


def test_a_session_names_the_classes_and_its_file_keeps_the_labels(tmp_path):
    (tmp_path / "net.py").write_text(FACTORY)
    (tmp_path / "classes.txt").write_text("cat\ndog\nfox\n")
    s = Session.load(f"{tmp_path}/net.py:make")
    try:
        s.set_labels(str(tmp_path / "classes.txt"))
        r = s.run()
        d = describe_outputs(r.output_without, r.output_with, s.model.meaning)
        want = ["cat", "dog", "fox"][int(r.output_without[0].argmax())]
        assert d["rows"][0]["top_without"][0]["label"] == want
        f = s.save(tmp_path / "s.hookscope.json")
    finally:
        s.close()
    assert json.loads(f.read_text())["model"]["labels"] == "classes.txt"
    s2 = Session.open_file(f, trust_code=True)  # net.py is this test's own factory
    try:
        assert s2.labels == str(tmp_path / "classes.txt") and s2.model.meaning.labels == ["cat", "dog", "fox"]
    finally:
        s2.close()
    (tmp_path / "classes.txt").unlink()  # the file moved away: the session opens, and says so
    s3 = Session.open_file(f, trust_code=True)
    try:
        assert s3.labels is None and any("classes.txt" in w for w in s3.load_warnings)
    finally:
        s3.close()
