"""Steering-vector files and saved vectors, as an attacker would write them: a pickle that
runs code, an object array, a header promising a huge array, a FIFO, a link to an endless
device, a session vector of millions of values or with a forged hash. Each is refused in one
line, without running code, blocking or exhausting memory."""

import json
import os
import struct
import sys

import numpy as np
import pytest
import torch

from hookscope.app.cli import main
from hookscope.core import HookscopeError, Intervention, PlanError, load_vector_file
from hookscope.core.plan.steer_vector import MAX_VECTOR_ELEMENTS, SteeringVector

sys.path.insert(0, os.path.dirname(__file__))
from hostile_files import pickle_payload, torch_save_payload  # noqa: E402


def refused(path):
    with pytest.raises(HookscopeError) as info:
        load_vector_file(path)
    assert "\n" not in str(info.value)
    return str(info.value)


def test_a_pickle_pt_never_runs(tmp_path):
    for name, data in (("plain.pt", pickle_payload(tmp_path / "m1")),
                       ("saved.pt", torch_save_payload(tmp_path / "m2"))):
        (tmp_path / name).write_bytes(data)
        refused(tmp_path / name)
    assert not (tmp_path / "m1").exists() and not (tmp_path / "m2").exists()


def test_an_object_npy_is_refused_unread(tmp_path):
    np.save(tmp_path / "o.npy", np.array([{"a": 1}, None], dtype=object), allow_pickle=True)
    assert "Python objects" in refused(tmp_path / "o.npy")


def npy_header(shape):
    header = repr({"descr": "<f4", "fortran_order": False, "shape": shape}).encode()
    header += b" " * (63 - (len(header) + 10) % 64) + b"\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header


def test_huge_shapes_are_refused_from_the_header(tmp_path):
    (tmp_path / "huge.npy").write_bytes(npy_header((1 << 40,)) + b"\0" * 64)
    refused(tmp_path / "huge.npy")
    (tmp_path / "wide.npy").write_bytes(npy_header((MAX_VECTOR_ELEMENTS + 1,)))
    with open(tmp_path / "wide.npy", "ab") as f:
        f.truncate(len(npy_header((MAX_VECTOR_ELEMENTS + 1,))) + 4 * (MAX_VECTOR_ELEMENTS + 1))
    refused(tmp_path / "wide.npy")
    torch.save(torch.zeros(3, 4), tmp_path / "matrix.pt")
    assert "1-d" in refused(tmp_path / "matrix.pt")


def test_a_fifo_and_an_endless_device_are_refused_without_blocking(tmp_path):
    os.mkfifo(tmp_path / "v.npy")
    assert "FIFO" in refused(tmp_path / "v.npy")
    os.symlink("/dev/zero", tmp_path / "z.pt")
    assert "not a regular file" in refused(tmp_path / "z.pt")


def test_a_saved_vector_of_millions_of_values_or_a_forged_hash_is_refused():
    huge = {"kind": "add", "vector": {"name": "v", "values": [0.0] * (MAX_VECTOR_ELEMENTS + 1)}}
    with pytest.raises(PlanError, match="above"):
        Intervention.from_dict(huge)
    nested = {"kind": "project", "vector": {"name": "v", "values": [[1.0, 2.0]]}}
    with pytest.raises(PlanError, match="flat list"):
        Intervention.from_dict(nested)
    good = SteeringVector("v", torch.ones(3)).to_dict()
    forged = {"kind": "add", "vector": {**good, "values": [1.0, 1.0, 2.0]}, "alpha": 1.0}
    with pytest.raises(PlanError, match="sha256"):
        Intervention.from_dict(forged)
    with pytest.raises(PlanError, match="NaN"):
        SteeringVector("v", torch.tensor([1.0, float("nan")]))


def test_the_cli_refuses_a_hostile_vector_in_one_line(tmp_path, capsys):
    (tmp_path / "evil.pt").write_bytes(pickle_payload(tmp_path / "marker"))
    code = main(["run", "demo:transformer", "--vector", f"v={tmp_path / 'evil.pt'}",
                 "--intervene", "encoder.layers.0=add:v:1"])
    out, err = capsys.readouterr()
    assert code == 2 and err.startswith("hookscope: error:") and err.count("\n") == 1
    assert not (tmp_path / "marker").exists()


def test_a_session_file_with_a_hostile_vector_is_refused(tmp_path, capsys):
    good = tmp_path / "s.hookscope.json"
    code = main(["run", "demo:transformer", "--vector", "v=" + str(_vec(tmp_path, 32)),
                 "--intervene", "encoder.layers.0=add:v:1", "--save-session", str(good), "--json"])
    first = json.loads(capsys.readouterr().out)
    assert code == 0
    (tmp_path / "ok.pt").unlink()  # the session holds the values, not only the file's name
    assert main(["run", "--session", str(good), "--json"]) == 0
    again = json.loads(capsys.readouterr().out)
    assert again["max_abs_diff"] == first["max_abs_diff"] and again["receipts"] == first["receipts"]
    data = json.loads(good.read_text())
    text = json.dumps(data)
    assert '"vector"' in text and '"sha256"' in text
    bad = tmp_path / "bad.hookscope.json"
    bad.write_text(text.replace('"values": [', '"values": [1e40, ', 1))
    code = main(["run", "--session", str(bad)])
    out, err = capsys.readouterr()
    assert code == 2 and err.count("\n") == 1 and "vector" in err


def _vec(tmp_path, n):
    path = tmp_path / "ok.pt"
    torch.save(torch.randn(n), path)
    return path
