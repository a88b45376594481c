"""Property tests of the session file reader: whatever a ``*.hookscope.json`` holds (any
JSON document, a damaged good one, any bytes), reading it gives a setup or a
:class:`SessionFileError`, never another exception; the file is left as it was, and a
session that fails to open it keeps everything it had. Bounded examples, no deadline."""

from __future__ import annotations

import copy
import json

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from hookscope.core import HookscopeError, Session
from hookscope.core.session.session_file import SessionFileError, SessionSetup, read_session_file

FAST = settings(max_examples=60, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.function_scoped_fixture])
FEW = settings(max_examples=12, deadline=None, derandomize=True,
               suppress_health_check=[HealthCheck.function_scoped_fixture])

GOOD = {"format": "hookscope-session", "version": 1,
        "model": {"spec": "demo:clamp", "weights": None},
        "input": {"text": "example", "file": False}, "device": "cpu",
        "plan": {"capture": ["0", "1"],
                 "interventions": {"0": {"kind": "clamp", "lo": "-inf", "hi": 0.5},
                                   "1": {"kind": "scale", "factor": 2.0}}},
        "options": {"stats_only": False, "train": False, "live": False},
        "view": {"selected": "0"}}

TEXT = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=30)
SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-(2**70), 2**70),
                    st.floats(allow_nan=True, allow_infinity=True), TEXT,
                    st.sampled_from(["inf", "-inf", "nan", "hookscope-session", "clamp", "scale",
                                     "zero", "noise", "patch", "mean_ablate", "0", "1", "~", ""]))
JSONISH = st.recursive(SCALARS, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(st.one_of(TEXT, st.sampled_from(sorted(GOOD))),
                                                 inner, max_size=4)), max_leaves=12)
# Specs a file may name without importing anything: a "module:function" spec would import
# whatever module it names, so generated text never holds a ':'.
SPECS = st.one_of(st.sampled_from(["demo:clamp", "demo:nope", "", " ", "missing.py:make",
                                   "missing.pt2", "~nobody-hookscope/net.py:make",
                                   "~nobody-hookscope/net.pt2", "a\x00b.pt2"]),
                  TEXT.map(lambda t: t.replace(":", "_")))
# Where in a good document a damage lands: (keys down to it).
PLACES = [(), ("format",), ("version",), ("model",), ("model", "spec"), ("model", "weights"),
          ("input",), ("input", "text"), ("input", "file"), ("device",), ("plan",),
          ("plan", "capture"), ("plan", "interventions"), ("plan", "interventions", "0"),
          ("plan", "interventions", "0", "lo"), ("plan", "interventions", "0", "hi"),
          ("plan", "interventions", "0", "kind"), ("plan", "interventions", "1", "factor"),
          ("options",), ("options", "live"), ("view",), ("view", "selected")]


@st.composite
def damaged(draw) -> object:
    """A good session document with one to three places replaced, removed or added to."""
    doc = copy.deepcopy(GOOD)
    doc["model"]["spec"] = draw(SPECS)
    for _ in range(draw(st.integers(1, 3))):
        place = draw(st.sampled_from(PLACES))
        if not place:
            return draw(JSONISH)
        parent = doc
        for key in place[:-1]:
            if not isinstance(parent, dict) or not isinstance(parent.get(key), dict):
                break
            parent = parent[key]
        else:
            how = draw(st.sampled_from(["replace", "remove", "add"]))
            if how == "remove":
                parent.pop(place[-1], None)
            elif how == "add" and isinstance(parent.get(place[-1]), dict):
                parent[place[-1]][draw(TEXT)] = draw(JSONISH)
            else:
                parent[place[-1]] = draw(JSONISH)
    if isinstance(doc.get("model"), dict) and isinstance(doc["model"].get("spec"), str):
        doc["model"]["spec"] = doc["model"]["spec"].replace(":", "_") \
            if doc["model"]["spec"] not in ("demo:clamp", "demo:nope", "missing.py:make",
                                            "~nobody-hookscope/net.py:make") else doc["model"]["spec"]
    return doc


DOCUMENTS = st.one_of(JSONISH, damaged())
GOOD_BYTES = json.dumps(GOOD).encode()


@st.composite
def damaged_bytes(draw) -> bytes:
    """A good file's bytes cut short, with bytes flipped, or with bytes put in."""
    raw = bytearray(GOOD_BYTES)
    how = draw(st.sampled_from(["cut", "flip", "insert"]))
    at = draw(st.integers(0, len(raw) - 1))
    if how == "cut":
        return bytes(raw[:at])
    if how == "flip":
        raw[at] = draw(st.integers(0, 255))
        return bytes(raw)
    return bytes(raw[:at]) + draw(st.binary(min_size=1, max_size=8)) + bytes(raw[at:])


def _write(folder, content: bytes):
    path = folder / "s.hookscope.json"
    path.write_bytes(content)
    return path


def _read(path) -> SessionSetup | None:
    """The setup, or ``None`` for a SessionFileError; anything else fails the test."""
    before = path.read_bytes()
    try:
        setup = read_session_file(path)
    except SessionFileError as exc:
        assert str(exc).startswith(path.name) or str(path) in str(exc), str(exc)
        setup = None
    assert path.read_bytes() == before  # reading writes nothing
    return setup


def _doc_bytes(doc: object) -> bytes:
    return json.dumps(doc, allow_nan=True).encode()  # NaN/Infinity tokens: Python's reader takes them


@FAST
@given(doc=DOCUMENTS)
@example(doc=GOOD)
@example(doc={**GOOD, "model": {"spec": "~nobody-hookscope/net.py:make"}})
@example(doc={**GOOD, "model": {"spec": "demo:clamp", "weights": "~nobody-hookscope/w.pt"}})
@example(doc={**GOOD, "input": {"text": "~nobody-hookscope/x.npy", "file": True}})
@example(doc={**GOOD, "plan": {"interventions": {"0": {"kind": "clamp", "lo": 10**400, "hi": 1}}}})
@example(doc={**GOOD, "plan": {"interventions": {"0": {"kind": "scale", "factor": 10**400}}}})
@example(doc={**GOOD, "plan": {"interventions": {"0": {"kind": "noise", "std": 1, "seed": 10**40}}}})
def test_any_json_document_reads_or_says_why(doc, tmp_path_factory):
    setup = _read(_write(tmp_path_factory.mktemp("doc"), _doc_bytes(doc)))
    if doc is GOOD:
        assert setup is not None and setup.spec == "demo:clamp"
    if setup is not None:
        assert isinstance(setup.spec, str) and setup.spec.strip()


@FAST
@given(content=st.one_of(st.binary(max_size=200), damaged_bytes()))
@example(content=b'{"format": "hookscope-session", "version": ' + b"9" * 5000 + b"}")
@example(content=b'{"a": ' + b"1" * 4301 + b"}")
@example(content=b"[" * 100_000)
@example(content=b'{"format": "hookscope-session", "version": 1e999}')
def test_any_bytes_read_or_say_why(content, tmp_path_factory):
    _read(_write(tmp_path_factory.mktemp("raw"), content))


def _state(s: Session) -> tuple:
    return (s.model, s.plan, s.input_text, s.device, s.options, dict(s.view), s.last_result,
            s.history.can_undo)


@FEW
@given(doc=damaged())
@example(doc={**GOOD, "model": {"spec": "demo:nope"}})
@example(doc={**GOOD, "plan": {"capture": ["no.such.layer"]}})
def test_a_session_that_fails_to_open_a_file_keeps_its_state(doc, tmp_path_factory):
    s = Session.load("demo:clamp")  # a model, a plan, an input and a result of its own
    try:
        s.capture("0")
        s.set_input("[[1.0, 2.0, 3.0]]")
        s.run()
        before = _state(s)
        path = _write(tmp_path_factory.mktemp("open"), _doc_bytes(doc))
        try:
            setup = read_session_file(path)
            s.open_setup(setup, run_after=False).result(60)
        except HookscopeError:
            assert _state(s) == before  # nothing of the failed file reached the session
        assert not s.busy
    finally:
        s.close()


@FEW
@given(content=st.one_of(st.binary(max_size=100), damaged_bytes(), DOCUMENTS.map(_doc_bytes)))
def test_session_open_file_raises_only_project_errors(content, tmp_path_factory):
    path = _write(tmp_path_factory.mktemp("sess"), content)
    try:
        s = Session.open_file(path, timeout_s=60)
    except HookscopeError:
        return
    s.close()
