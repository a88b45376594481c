"""Models, inputs and session files that used to end in a traceback: each is one line,
status 2, in the CLI, and a banner in a window that opens and stays usable.

A forward raising ``GeneratorExit``; an exception whose ``__str__`` raises; an output
nested 5000 tuples deep, or a dict that holds itself (RecursionError in every walker); a
3000-deep dict literal input; a session whose patch source is a scalar tensor (torch
cannot view a 0-d tensor as bytes) or names no dtype; a session whose view nests past
what can be written again (``--save-session``).
"""

from __future__ import annotations

import json

import pytest

from hookscope.app.cli import main

import faulty_models as fm

DEEP_DICT = '{"a":' * 3000 + "1" + "}" * 3000
DEEP_LIST_IN_DICT = '{"a":' + "[" * 3000 + "1" + "]" * 3000 + "}"

CASES = [
    # argv for `hookscope run`, what the line says
    (["faulty_models:raises_generator_exit"], "raised GeneratorExit: the model's generator closed"),
    (["faulty_models:raises_unprintable"], "Unprintable whose message cannot be shown"),
    (["faulty_models:deep_output"], "the model's output cannot be read: a value is nested deeper"),
    (["faulty_models:self_referential_output"], "holds itself"),
    (["faulty_models:dict_example", "--input", DEEP_DICT], "nested too deeply to read"),
    (["demo:clamp", "--input", DEEP_DICT], "nested too deeply to read"),
    (["demo:clamp", "--input", DEEP_LIST_IN_DICT], "nested too deeply to read"),
]


@pytest.mark.parametrize("argv,says", CASES, ids=["generator-exit", "unprintable", "deep-output",
                                                  "self-referential", "deep-dict-kw",
                                                  "deep-dict", "deep-list-in-dict"])
def test_one_line_not_a_traceback(argv, says, capsys):
    made = len(fm.MADE)
    assert main(["run", *argv]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("hookscope: error: "), err
    assert says in err and "Traceback" not in err, err
    for module in fm.MADE[made:]:
        assert fm.hooks_left(module) == 0


def _session(tmp_path, name, **changes) -> str:
    data = {"format": "hookscope-session", "version": 1, "model": {"spec": "demo:features"},
            "plan": {"capture": ["fc1"]}}
    data.update(changes)
    path = tmp_path / name
    path.write_text(json.dumps(data), encoding="utf-8")
    return str(path)


def _patch(source) -> dict:
    return {"capture": ["fc1"], "interventions": {"fc1": {"kind": "patch", "source_input": source}}}


@pytest.mark.parametrize("source,says", [
    ({"tensor": 3.0, "dtype": "float32"}, "on the source input of fc1"),
    ({"tensor": [1.0], "dtype": "no_such_dtype"}, "source_input must be an input spec"),
], ids=["scalar-tensor", "no-such-dtype"])
def test_a_session_with_an_odd_patch_source_is_one_line(tmp_path, source, says, capsys):
    path = _session(tmp_path, "patch.hookscope.json", plan=_patch(source))
    assert main(["run", "--session", path]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and says in err and "internal error" not in err, err


def test_a_deeply_nested_view_is_refused_on_reading_and_on_saving(tmp_path, capsys):
    deep: dict = {}
    inner = deep
    for _ in range(900):
        inner["a"] = {}
        inner = inner["a"]
    path = _session(tmp_path, "deep.hookscope.json", view={"x": deep})
    out = tmp_path / "again.hookscope.json"
    assert main(["run", "--session", path, "--save-session", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "view is nested more than 32 levels" in err, err
    assert not out.exists()

    from hookscope.core import HookscopeError, Session, load_model
    from hookscope.core.session.session_file import write_session_file

    session = Session.offline(load_model("demo:features"), "example")
    try:
        session.view = {"x": deep}  # a script can set any view; writing it must not crash
        with pytest.raises(HookscopeError, match="nested too deeply"):
            write_session_file(out, session)
    finally:
        session.close()
    assert not out.exists()


# -- the window: the same mistakes open a usable window with the message in its banner ------
WINDOW_CASES = [
    (["faulty_models:raises_generator_exit"], "GeneratorExit"),
    (["faulty_models:raises_unprintable"], "whose message cannot be shown"),
    (["faulty_models:deep_output"], "nested deeper"),
    (["faulty_models:self_referential_output"], "holds itself"),
    (["faulty_models:dict_example", "--input", "random:100000x100000"], "above the input memory budget"),
    (["demo:clamp", "--input", DEEP_DICT], "nested too deeply to read"),
    (["demo:clamp", "--max-memory", "cpu=" + "9" * 400 + "GB"], "more than 1.0 EiB"),
    (["demo:clamp", "--max-input-bytes", "9" * 400], "more than 1.0 EiB"),
    (["demo:clamp", "--ray-budget", "1MiB"], "needs --ray"),
]


@pytest.mark.parametrize("argv,says", WINDOW_CASES,
                         ids=["generator-exit", "unprintable", "deep-output", "self-referential",
                              "random-dict", "deep-dict", "max-memory", "max-input-bytes",
                              "ray-budget"])
def test_the_window_opens_with_the_message_in_its_banner(make_window, qtbot, argv, says):
    win = make_window(argv)
    qtbot.waitUntil(lambda: says in win.error_text() and win.is_idle(), timeout=30_000)
    assert "Traceback" not in win.error_text()
    # still usable: the demo runs in the same window
    win.load("demo:clamp")
    qtbot.waitUntil(lambda: win.loaded is not None and win.loaded.spec == "demo:clamp"
                    and win.last_result is not None and win.is_idle(), timeout=30_000)


def test_the_window_opens_a_session_with_a_scalar_patch_source(make_window, qtbot, tmp_path):
    path = _session(tmp_path, "scalar.hookscope.json", plan=_patch({"tensor": 3.0, "dtype": "float32"}))
    win = make_window([path])
    qtbot.waitUntil(lambda: "on the source input of fc1" in win.error_text() and win.is_idle(),
                    timeout=30_000)
    assert "internal error" not in win.error_text()
