"""Catalogue rows for session files: each damaged ``*.hookscope.json`` a person could end up
with, the one clear error it must give (a SessionFileError naming the file, chained from
the cause), found by the property tests in test_session_file_properties.py; and a failed
``Session.load``/``Session.open_file`` that left its runner thread alive (found by hand)."""

from __future__ import annotations

import json
import threading

import pytest

from hookscope.core import HookscopeError, Session
from hookscope.core.session.session_file import SessionFileError, read_session_file

HEAD = '{"format": "hookscope-session", "version": 1, '

SESSION_FILE_CASES = [
    # file text, words in the message, cause class
    (HEAD + '"model": {"spec": "~nobody-hookscope/net.py:make"}}', "names no file", RuntimeError),
    (HEAD + '"model": {"spec": "~nobody-hookscope/net.pt2"}}', "names no file", RuntimeError),
    (HEAD + '"model": {"spec": "demo:cnn", "weights": "~nobody-hookscope/w.safetensors"}}',
     "names no file", RuntimeError),
    (HEAD + '"model": {"spec": "demo:cnn"}, "input": {"text": "~nobody-hookscope/x.npy", '
     '"file": true}}', "names no file", RuntimeError),
    (HEAD + '"model": {"spec": ' + json.dumps("~a\x00b/net.pt2") + '}}', "names no file", ValueError),
    (HEAD + '"model": {"spec": "demo:cnn"}, "plan": {"interventions": {"conv1": '
     '{"kind": "clamp", "lo": -1' + "0" * 400 + ', "hi": 1}}}}', "conv1", OverflowError),
    (HEAD + '"model": {"spec": "demo:cnn"}, "plan": {"interventions": {"conv1": '
     '{"kind": "scale", "factor": 1' + "0" * 400 + '}}}}', "conv1", OverflowError),
    (HEAD + '"model": {"spec": "demo:cnn"}, "view": {"zoom": ' + "9" * 5000 + '}}',
     "number too long", ValueError),
]


def _causes(exc: BaseException) -> list[BaseException]:
    out = []
    while exc.__cause__ is not None:
        exc = exc.__cause__
        out.append(exc)
    return out


@pytest.mark.parametrize("case", range(len(SESSION_FILE_CASES)))
def test_damaged_session_files_say_why(case, tmp_path):
    text, words, cause = SESSION_FILE_CASES[case]
    path = tmp_path / "bad.hookscope.json"
    path.write_text(text, encoding="utf-8")
    for read in (read_session_file, Session.open_file):
        with pytest.raises(SessionFileError) as info:
            read(path)
        msg = str(info.value)
        assert msg.startswith("bad.hookscope.json") and words in msg, msg
        assert "\n" not in msg and any(isinstance(e, cause) for e in _causes(info.value))
        assert isinstance(info.value, HookscopeError)


def _runner_threads() -> int:
    return sum(t.name == "hookscope-runner" and t.is_alive() for t in threading.enumerate())


@pytest.mark.parametrize("open_it", [
    lambda p: Session.open_file(p),
    lambda p: Session.load("demo:nope"),
    lambda p: Session.load("demo:cnn", device="no-such-device"),
], ids=["open_file", "load-unknown-demo", "load-unknown-device"])
def test_a_failed_load_or_open_leaves_no_runner_thread(open_it, tmp_path):
    path = tmp_path / "nope.hookscope.json"
    path.write_text(HEAD + '"model": {"spec": "demo:nope"}}', encoding="utf-8")
    before = _runner_threads()
    for _ in range(3):  # before the fix: one live runner thread more per call, until a gc
        with pytest.raises(HookscopeError):
            open_it(path)
    assert _runner_threads() == before
