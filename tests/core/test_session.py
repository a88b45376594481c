"""The Qt-free Session: the README's scripting snippet, events, Live, undo/redo, session files."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest
import torch

from hookscope.core import Clamp, Noise, Plan, Scale, Session, SessionFileError, Zero, compare, load_model
from hookscope.core.model.code_trust import CodeTrustError
from hookscope.core.session.session_file import read_session_file

from runner_doubles import HALF_SPEC


@pytest.fixture
def session():
    made = []

    def make(spec="demo:cnn", **kw):
        s = Session.load(spec, **kw)
        made.append(s)
        return s

    yield make
    for s in made:
        assert s.close()


def test_the_readme_sessions_snippet_runs_and_matches_a_hand_written_hook(session, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    s = session("demo:cnn")
    s.capture("conv1", "fc")
    s.intervene("conv2", Zero())
    r = s.run()
    s.save("digits.hookscope.json")
    r2 = Session.open_file("digits.hookscope.json").run()

    ref = load_model("demo:cnn")
    handle = ref.module.conv2.register_forward_hook(lambda _m, _i, out: torch.zeros_like(out))
    try:
        with torch.no_grad():
            want_with = ref.module(ref.example_input)
    finally:
        handle.remove()
    with torch.no_grad():
        want_without = ref.module(ref.example_input)
    assert torch.equal(r.output_with, want_with) and torch.equal(r.output_without, want_without)
    assert list(r.captures) == ["conv1", "fc"]
    assert torch.equal(r2.output_with, r.output_with)
    assert torch.equal(r2.output_without, r.output_without)
    assert r2.plan == r.plan


def test_one_intervention_per_layer_the_newest_replaces(session):
    s = session("demo:clamp")
    s.intervene("0", Clamp(-0.5, 0.5))
    s.intervene("0", Scale(2.0))
    assert s.plan.all_interventions() == {"0": Scale(2.0)} and s.plan.clamp == {}
    s.intervene("0", Clamp(-1, 1))
    assert s.plan.all_interventions() == {"0": Clamp(-1.0, 1.0)} and s.plan.clamp == {"0": (-1.0, 1.0)}
    s.clear_intervention("0")
    assert s.plan.is_empty


def test_events_and_live_mode_rerun_on_every_change(session):
    s = session("demo:clamp")
    seen = []
    s.subscribe(seen.append)
    s.capture("0")
    assert [e.kind for e in seen] == ["plan"] and seen[0].value.capture == ("0",)
    s.set_options(live=True)      # turning Live on runs once
    s.run()                        # and a waited run: both answered in order
    results = [e.value for e in seen if e.kind == "result"]
    assert results and results[-1].plan.capture == ("0",)
    seen.clear()
    s.intervene("0", Clamp(-0.1, 0.1))
    r = s.run()
    assert r.plan.clamp == {"0": (-0.1, 0.1)}
    assert "plan" in [e.kind for e in seen]
    assert s.last_result is r


def test_undo_redo_of_plan_edits_and_one_step_per_drag(session):
    s = session("demo:clamp")
    plans = [s.plan]
    s.capture("0")
    plans.append(s.plan)
    for hi in (0.9, 0.7, 0.5):    # the steps of one drag
        s.intervene("0", Clamp(-1, hi), merge="0")
    s.history.seal()
    plans.append(s.plan)
    s.intervene("1", Scale(3.0))
    plans.append(s.plan)
    assert s.undo() and s.plan == plans[2]
    assert s.undo() and s.plan == plans[1]   # the whole drag is one step
    assert s.undo() and s.plan == plans[0]
    assert not s.undo() and not s.history.can_undo
    assert s.redo() and s.redo() and s.plan == plans[2]
    s.capture("1")                            # a new edit drops what could be redone
    assert not s.history.can_redo and not s.redo()


def test_stats_only_and_train_options_reach_the_run(session):
    s = session("demo:cnn")
    s.capture("conv1")
    s.set_options(stats_only=True)
    rec = s.run().captures["conv1"][0]
    assert rec.tensor is None and rec.stats is not None
    s.set_options(stats_only=False, train=True)
    assert s.run().captures["conv1"][0].tensor is not None
    assert s.model.module.training


def test_a_failing_run_raises_and_the_session_goes_on(session):
    s = session("demo:clamp")
    s.set_input("[[1.0, 2.0]]")
    with pytest.raises(Exception, match="forward failed"):
        s.run()
    assert "forward failed" in s.last_error
    s.set_input("example")
    assert s.run().output_with is not None


def test_load_error_is_the_cores_error():
    from hookscope.core import SpecError

    with pytest.raises(SpecError, match="unknown demo"):
        Session.load("demo:nope")


FACTORY = textwrap.dedent("""
    import torch
    from torch import nn

    def make():
        torch.manual_seed(1)
        return nn.Sequential(nn.Linear(3, 5), nn.ReLU(), nn.Linear(5, 2))
""")


def test_relative_paths_resolve_against_the_session_files_folder(session, tmp_path, monkeypatch):
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "net.py").write_text(FACTORY)
    torch.manual_seed(7)
    trained = torch.nn.Sequential(torch.nn.Linear(3, 5), torch.nn.ReLU(), torch.nn.Linear(5, 2))
    torch.save(trained.state_dict(), proj / "w.pt")
    np.save(proj / "x.npy", np.array([[0.5, -1.0, 2.0]], dtype=np.float32))
    s = session(f"{proj}/net.py:make", weights=str(proj / "w.pt"), input_text=str(proj / "x.npy"))
    s.capture("0")
    s.intervene("0", Noise(0.3, seed=5))
    r = s.run()
    s.save(proj / "s.hookscope.json")
    d = json.loads((proj / "s.hookscope.json").read_text())
    assert d["model"] == {"spec": "net.py:make", "weights": "w.pt"}
    assert d["input"] == {"text": "x.npy", "file": True}

    moved = tmp_path / "elsewhere"
    shutil.copytree(proj, moved)
    shutil.rmtree(proj)
    monkeypatch.chdir(tmp_path)
    # the session names net.py: a session file is data, so its code runs only when trusted
    with pytest.raises(CodeTrustError, match="net.py"):
        Session.open_file(moved / "s.hookscope.json")
    s2 = Session.open_file(moved / "s.hookscope.json", trust_code=True)
    r2 = s2.run()
    s2.close()
    assert torch.equal(r2.output_with, r.output_with)
    with torch.no_grad():
        want = trained(torch.tensor([[0.5, -1.0, 2.0]]))
    assert torch.equal(r2.output_without, want)


@pytest.mark.parametrize("content, words", [
    (b"{not json", "broken JSON at line 1"),
    (b'{"name": "a package.json"}', "not a Hookscope session file"),
    (b"\xff\xfe\x00", "not UTF-8"),
    (b'{"format": "hookscope-session", "version": 99, "model": {"spec": "demo:cnn"}}', "newer Hookscope"),
    (b'{"format": "hookscope-session", "version": 1}', "model is missing"),
    (b'{"format": "hookscope-session", "version": 1, "model": {"spec": "demo:cnn"}, '
     b'"plan": {"interventions": {"conv1": {"kind": "melt"}}}}', "unknown intervention kind 'melt'"),
    (b'{"format": "hookscope-session", "version": 1, "model": {"spec": "demo:cnn"}, '
     b'"plan": {"interventions": {"conv1": {"kind": "clamp", "lo": 2, "hi": 1}}}}', "lo must be <= hi"),
    (b'{"format": "hookscope-session", "version": 1, "model": {"spec": "demo:cnn"}, '
     b'"plan": {"capture": "conv1"}}', "plan.capture has the wrong type"),
    (b"[" * 100_000, "nested too deep"),
])
def test_damaged_or_foreign_files_get_a_clear_error(tmp_path, content, words):
    f = tmp_path / "bad.hookscope.json"
    f.write_bytes(content)
    with pytest.raises(SessionFileError, match="bad.hookscope.json") as info:
        read_session_file(f)
    assert words in str(info.value)


def test_a_file_round_trips_every_setting(session, tmp_path):
    s = session("demo:cnn", device="cpu")
    s.capture("conv1", "relu1")
    s.intervene("conv1", Clamp(float("-inf"), 0.25))
    s.intervene("fc", Scale(0.5))
    s.set_options(stats_only=True)
    s.set_input("random:1x1x8x8:seed=3")
    s.view["selected"] = "relu1"
    s.save(tmp_path / "a.hookscope.json")
    setup = read_session_file(tmp_path / "a.hookscope.json")
    assert setup.plan == s.plan and setup.options == s.options
    assert setup.input_text == "random:1x1x8x8:seed=3" and setup.view == {"selected": "relu1"}
    assert setup.spec == "demo:cnn" and setup.device == "cpu" and not setup.trust_pickle


#: A session file as the first writer (before Plan.to_dict) wrote it: no "keep_tensors".
FIRST_WRITER = """{"format": "hookscope-session", "version": 1,
 "model": {"spec": "demo:cnn", "weights": null}, "input": {"text": "example", "file": false},
 "device": "cpu",
 "plan": {"capture": ["conv1", "fc"],
          "interventions": {"conv1": {"kind": "clamp", "lo": null, "hi": 0.25},
                            "conv2": {"kind": "zero", "units": [1, 3], "dim": null},
                            "fc": {"kind": "noise", "std": 0.2, "seed": 7}}},
 "options": {"stats_only": false, "train": false, "live": false}, "view": {}}
"""


def test_a_file_of_the_first_writer_still_reads_and_writes_back_the_same(session, tmp_path):
    f = tmp_path / "old.hookscope.json"
    f.write_text(FIRST_WRITER)
    setup = read_session_file(f)
    assert setup.plan.capture == ("conv1", "fc") and setup.plan.keep_tensors
    assert setup.plan.interventions == {"conv1": Clamp(float("-inf"), 0.25),
                                        "conv2": Zero(units=(1, 3)), "fc": Noise(0.2, 7)}
    s = session("demo:cnn")
    s.set_plan(setup.plan)
    s.save(tmp_path / "new.hookscope.json")
    new = json.loads((tmp_path / "new.hookscope.json").read_text())
    old = json.loads(FIRST_WRITER)
    assert new["plan"]["interventions"] == old["plan"]["interventions"]
    assert new["plan"]["capture"] == old["plan"]["capture"]
    f.write_text(FIRST_WRITER.replace('"lo": null', '"lo": "-inf"'))  # JSON's stand-in for -inf
    assert read_session_file(f).plan == setup.plan


def test_core_and_a_full_session_run_load_no_qt():
    code = ("import sys; from hookscope.core import Session, Zero; s = Session.load('demo:cnn'); "
            "s.capture('conv1'); s.intervene('conv2', Zero()); s.run(); s.close(); "
            "bad = [m for m in sys.modules if m.split('.')[0] in "
            "('PySide6', 'pyqtgraph', 'shiboken6', 'superqt', 'PyQt5', 'PyQt6')]; "
            "print(bad); sys.exit(1 if bad else 0)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr


def write_session_naming_a_missing_layer(session, tmp_path):
    """A demo:cnn session file whose plan also names 'conv9', a layer demo:cnn lacks
    (as a file written for another version of a model would)."""
    s = session("demo:cnn")
    s.capture("conv1")
    s.intervene("conv2", Zero())
    f = s.save(tmp_path / "old.hookscope.json")
    d = json.loads(f.read_text())
    d["plan"]["capture"].append("conv9")
    f.write_text(json.dumps(d))
    return f


def test_a_session_naming_a_layer_the_model_lacks_keeps_the_rest_and_says_so(session, tmp_path):
    f = write_session_naming_a_missing_layer(session, tmp_path)
    s = Session.open_file(f)
    seen = []
    s.subscribe(lambda ev: seen.append(ev))
    try:
        assert s.plan.capture == ("conv1",) and isinstance(s.plan.intervention_for("conv2"), Zero)
        assert "unknown layer 'conv9'" in s.plan_problem and "'conv1'" in s.plan_problem
        r = s.run()  # the rest of the plan runs
        assert set(r.captures) == {"conv1"}
        done = threading.Event()
        s.subscribe(lambda ev: ev.kind == "result" and done.set())
        s.open_setup(read_session_file(f))  # loads again, then runs once
        assert done.wait(60)
        kinds = [ev.kind for ev in seen]
        # told after "model": a window clears old messages when a model arrives
        assert kinds.index("load_warning") > kinds.index("model")
        warning = next(ev.value for ev in seen if ev.kind == "load_warning")
        assert "conv9" in warning and "left out" in warning
    finally:
        s.close()


def test_live_shows_a_nearly_done_run_then_the_newest_and_goes_idle_once(session):
    s = session(HALF_SPEC)
    s.run()  # the runner learns how long a run takes
    m = s.model.module
    seen = []
    done = threading.Event()
    s.subscribe(lambda ev: (seen.append(ev), ev.kind == "idle" and done.set()))
    m.release.clear()
    m.at_gate.clear()
    s.set_options(live=True)  # runs the current plan at once
    assert m.at_gate.wait(30)  # held half done
    s.intervene("lin", Clamp(-0.2, 0.2))  # the newest
    m.release.set()
    assert done.wait(30)
    results = [ev.value for ev in seen if ev.kind == "result"]
    assert [r.plan.clamp for r in results] == [{}, {"lin": (-0.2, 0.2)}]  # the held one, then the newest
    assert [ev.kind for ev in seen].count("idle") == 1 and s.last_result is results[-1]
    want = compare(m, torch.tensor([[1.0, 2.0, 3.0]]), Plan(clamp={"lin": (-0.2, 0.2)}))
    assert torch.equal(results[-1].output_with, want.output_with)
