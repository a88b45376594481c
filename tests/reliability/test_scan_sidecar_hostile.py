"""A session's scan sidecar, as an attacker or an accident leaves it: a FIFO, a link to
/dev/zero, a file claiming 2 GB, JSON nested without end, a name that climbs out of the
session's folder, a symbolic link, contents changed after saving, damaged fields. Each is
refused in one line that says why, the session itself opens, and nothing hangs. Saving
never writes through a link or over a file that is not a saved scan."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

import pytest

from hookscope.core import HookscopeError, Session, load_model
from hookscope.core.analyses import ScanRequest, scan
from hookscope.core.dataset import open_inputs
from hookscope.core.session import SIDECAR_SUFFIX, SavedScan, read_session_file

DIGITS = Path(__file__).resolve().parents[2] / "resources" / "digits_test.safetensors"
NAME = "run" + SIDECAR_SUFFIX


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    cnn = load_model("demo:cnn")
    res = scan(cnn, ScanRequest(open_inputs(DIGITS), capture=("fc",), top_k=3, limit=30))
    folder = tmp_path_factory.mktemp("saved")
    s = Session.offline(cnn)
    s.saved_scan = SavedScan(res, "fc:1")
    s.save(folder / "run.hookscope.json")
    return folder, cnn, res


@pytest.fixture
def session(saved, tmp_path) -> Path:
    """A fresh copy of the saved session and its sidecar."""
    folder = saved[0]
    for f in folder.iterdir():
        shutil.copy(f, tmp_path / f.name)
    return tmp_path / "run.hookscope.json"


def _name_in_session(session: Path, name: str, digest: str | None = None) -> None:
    d = json.loads(session.read_text())
    d["scan"]["file"] = name
    if digest is not None:
        d["scan"]["sha256"] = digest
    session.write_text(json.dumps(d))


def _rehash(session: Path, raw: bytes) -> None:
    """Replace the sidecar with ``raw`` and name its true hash (only the content is wrong)."""
    (session.parent / NAME).write_bytes(raw)
    _name_in_session(session, NAME, hashlib.sha256(raw).hexdigest())


def _refused(session: Path, *words: str) -> str:
    setup = read_session_file(session)  # the session itself opens
    assert setup.spec == "demo:cnn" and setup.scan is None
    note = setup.scan_note
    assert note is not None and "\n" not in note and len(note) < 400
    for w in words:
        assert w in note, note
    return note


def test_an_intact_sidecar_is_read(session):
    assert read_session_file(session).scan is not None


def test_a_missing_sidecar(session):
    (session.parent / NAME).unlink()
    _refused(session, "does not exist")


def test_a_fifo(session):
    side = session.parent / NAME
    side.unlink()
    os.mkfifo(side)
    _refused(session, "FIFO")


def test_a_link_to_dev_zero(session):
    side = session.parent / NAME
    side.unlink()
    side.symlink_to("/dev/zero")
    _refused(session, "symbolic link")


def test_two_gigabytes_claimed(session):
    side = session.parent / NAME
    with open(side, "r+b") as f:
        f.truncate(2 * 1024 ** 3)  # sparse: claims 2 GB, takes no disk
    _refused(session, "bytes or more")


def test_json_nested_without_end(session):
    _rehash(session, b"[" * 200_000 + b"]" * 200_000)
    _refused(session, "not readable JSON")


def test_json_nested_deeper_than_a_scan(session):
    _rehash(session, json.dumps({"format": "hookscope-scan", "x": [[[[[[[[[[1]]]]]]]]]]}).encode())
    _refused(session, "nests more than")


@pytest.mark.parametrize("name", ["../../etc/passwd", "/etc/passwd", "sub/" + NAME,
                                  "..\\" + NAME, "../" + NAME, "." + NAME])
def test_a_name_outside_the_folder(session, name):
    _name_in_session(session, name)
    _refused(session, "not a file name beside the session")


def test_a_symbolic_link_to_a_real_saved_scan(session, tmp_path_factory):
    side = session.parent / NAME
    elsewhere = tmp_path_factory.mktemp("elsewhere") / NAME
    shutil.move(side, elsewhere)
    side.symlink_to(elsewhere)
    _refused(session, "symbolic link")


def test_changed_after_saving(session):
    side = session.parent / NAME
    d = json.loads(side.read_text())
    d["rows"][0][3] = (d["rows"][0][3] or 0) + 1  # a prediction edited by hand
    side.write_text(json.dumps(d))
    _refused(session, "SHA-256 differs")


@pytest.mark.parametrize("edit", [
    lambda d: d["layers"]["fc"].update(top_index=[[10 ** 6] * 3] * 10),
    lambda d: d["layers"]["fc"].update(top_values=[[1.0], [1.0, 2.0]]),
    lambda d: d["rows"].append(["x"] * 7),
    lambda d: d["inputs"].update(names={"../x": "y"}),
    lambda d: d.update(format="pickle"),
    lambda d: d["layers"]["fc"].update(min=10 ** 400),
    lambda d: d["inputs"].update(count=-5),
    lambda d: d.update(rows={"0": 1}),
])
def test_damaged_fields_with_a_true_hash(session, edit):
    d = json.loads((session.parent / NAME).read_text())
    edit(d)
    _rehash(session, json.dumps(d).encode())
    _refused(session)


def test_a_session_with_a_refused_sidecar_opens_and_runs(session):
    (session.parent / NAME).unlink()
    s = Session.open_file(session)
    try:
        assert s.model is not None and s.saved_scan is None
    finally:
        s.close()


def test_saving_never_writes_through_a_link_or_over_a_fifo(saved, tmp_path):
    _, cnn, res = saved
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me\n")
    side = tmp_path / NAME
    side.symlink_to(victim)
    s = Session.offline(cnn)
    s.saved_scan = SavedScan(res)
    with pytest.raises(HookscopeError, match="not a saved scan"):
        s.save(tmp_path / "run.hookscope.json")
    assert victim.read_text() == "keep me\n" and side.is_symlink()
    side.unlink()
    os.mkfifo(side)
    with pytest.raises(HookscopeError, match="not a saved scan"):
        s.save(tmp_path / "run.hookscope.json")
    assert not (tmp_path / "run.hookscope.json").exists()


def test_a_unit_text_of_megabytes_is_not_put_back(session):
    d = json.loads((session.parent / NAME).read_text())
    d["unit"] = "fc:1" + "9" * 1_000_000
    _rehash(session, json.dumps(d).encode())
    setup = read_session_file(session)
    assert setup.scan is not None and setup.scan.unit == ""
