"""Hostile ``saes`` and ``views`` entries in a session file. An SAE folder a session file names
is data, read with every refusal of ``--sae`` (pickles never loaded, sizes checked before
anything is allocated, FIFOs and devices refused without blocking); a view's settings are
checked field by field. Each is refused in one line with status 2 naming the file and the
entry, no code runs (the payload would create a marker). The SAE cases run in ONE subprocess
with a time and a memory limit, so a regression fails here instead of hanging."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from hookscope.core import Session
from hookscope.core.session.session_file import SessionFileError, read_session_file
from test_hostile_sae import CASE_NAMES, HERE, _address_space_now, build_cases

HEAD = {"format": "hookscope-session", "version": 2, "model": {"spec": "demo:lm"}}

_CHILD = r"""
import contextlib, io, json, resource, sys
from hookscope.app.cli import main
import torch
soft = int(sys.argv[2])
resource.setrlimit(resource.RLIMIT_AS, (soft, resource.getrlimit(resource.RLIMIT_AS)[1]))
out = {}
for name, path in json.loads(sys.argv[1]).items():
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            rc = main(["run", "--session", path])
        except BaseException as exc:
            rc = repr(exc)
    out[name] = [rc, err.getvalue()]
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    root = tmp_path_factory.mktemp("session_sae")
    marker = root / "MARKER"
    cases = build_cases(root, marker)
    files = {}
    for i, (name, (folder, _)) in enumerate(cases.items()):
        path = root / f"case{i}.hookscope.json"
        path.write_text(json.dumps({**HEAD, "saes": {"blocks.0": str(folder)}}))
        files[name] = str(path)
    limit = _address_space_now() + (6 << 30)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, "-c", _CHILD, json.dumps(files), str(limit)],
                          capture_output=True, text=True, timeout=180, env=env, cwd=root)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return cases, marker, json.loads(proc.stdout.splitlines()[-1])


@pytest.mark.timeout(300)
@pytest.mark.parametrize("case", CASE_NAMES)
def test_a_hostile_sae_folder_named_by_a_session_file_is_refused(results, case):
    cases, marker, out = results
    rc, err = out[case]
    assert rc == 2, err
    assert err.count("\n") == 1 and err.startswith("hookscope: error: case"), err
    assert "saes.blocks.0" in err and cases[case][1] in err, err
    assert not marker.exists()


VIEW_CASES = [
    # the LM part of the file, words the refusal must hold
    ({"saes": ["demo"]}, "saes must be an object"),
    ({"saes": {"blocks.0": 7}}, "must name an SAE folder"),
    ({"saes": {"blocks.0": ""}}, "must name an SAE folder"),
    ({"saes": {f"l{i}": "demo" for i in range(300)}}, "at most 256"),
    ({"views": {"evil": {}}}, "not a view Hookscope keeps"),
    ({"views": {"lens": {"__class__": "x"}}}, "not a setting of the lens view"),
    ({"views": {"lens": {"top_k": 10 ** 12}}}, "whole number in 1..1000"),
    ({"views": {"lens": {"top_k": True}}}, "whole number in 1..1000"),
    ({"views": {"lens": {"target": [1, 2]}}}, "a token"),
    ({"views": {"generation": {"n": 10 ** 9}}}, "1.."),
    ({"views": {"generation": {"n": 3, "temperature": "inf"}}}, "must be a number"),
    ({"views": {"generation": {"n": 3, "temperature": -1.0}}}, "temperature"),
    ({"views": {"generation": {"temperature": 0.5}}}, "views.generation"),
    ({"views": {"attention": {"layers": []}}}, "a list of layer paths"),
    ({"views": {"attention": {"layers": [{"a": 1}]}}}, "a list of layer paths"),
    ({"views": {"attention": {"layers": ["blocks.0.attn"], "row": -1}}}, "batch row"),
    ({"views": {"sae": "blocks.0"}}, "must be an object"),
    ({"views": []}, "views must be an object"),
]


@pytest.mark.parametrize("case", range(len(VIEW_CASES)))
def test_hostile_lm_views_in_a_session_file_say_why(case, tmp_path):
    extra, words = VIEW_CASES[case]
    path = tmp_path / "bad.hookscope.json"
    path.write_text(json.dumps({**HEAD, **extra}))
    for read in (read_session_file, Session.open_file):
        with pytest.raises(SessionFileError) as info:
            read(path)
        msg = str(info.value)
        assert msg.startswith("bad.hookscope.json") and words in msg, msg
        assert "\n" not in msg

