"""The ``@pos=``/``@heads=``/``@units=`` suffix and session files' ``at`` as an attacker
would write them: huge ranges allocate nothing, long lists and odd text are refused in one
line, nothing is evaluated, and any typed text gives a value or a project error."""

from __future__ import annotations

import json
import time
import tracemalloc

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hookscope.app.cli import main
from hookscope.core import At, HookscopeError, Scale
from hookscope.core.plan.at import parse_selector, resolve, split_suffix
from hookscope.core.plan.intervention_registry import from_dict, parse_intervention

FAST = settings(max_examples=80, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.function_scoped_fixture])
SELECTORISH = st.text(alphabet="0123456789-+:,@=lastlposheadunits _x\n\x00é", max_size=60)
LM = ["run", "demo:lm", "--input", "text:the cat sat on the "]


@FAST
@given(text=SELECTORISH)
def test_any_suffix_text_gives_a_value_or_a_project_error(text):
    try:
        iv = parse_intervention("scale:0.5" + text)
    except HookscopeError:
        return
    at = iv.where()
    body = split_suffix("scale:0.5" + text)[0]
    # What was read writes back to the same intervention.
    assert parse_intervention(body + (at.suffix() if at is not None else "")) == iv


@FAST
@given(sel=st.lists(st.one_of(st.integers(-10**12, 10**12),
                              st.tuples(st.one_of(st.none(), st.integers(-10**12, 10**12)),
                                        st.one_of(st.none(), st.integers(-10**12, 10**12)))),
                    min_size=1, max_size=8),
       n=st.integers(1, 64))
def test_resolve_is_a_slice_of_the_axis_or_an_error(sel, n):
    text = ",".join(f"{'' if a is None else a}:{'' if b is None else b}" if isinstance(x, tuple)
                    else str(x) for x in sel for a, b in [x if isinstance(x, tuple) else (0, 0)])
    parsed = parse_selector(text)
    try:
        got = resolve(parsed, n, "positions")
    except HookscopeError:
        return
    want: set[int] = set()
    for x in sel:
        want.update(range(n)[slice(*x)] if isinstance(x, tuple) else [x % n])
    assert got == sorted(want) and all(0 <= i < n for i in got)


@pytest.mark.parametrize("suffix", ["@pos=0:999999999999", "@pos=-999999999999:", "@units=:99999999999",
                                    "@pos=0:999999999999,0:999999999999"])
def test_huge_ranges_allocate_nothing(suffix):
    iv = parse_intervention("scale:0" + suffix)
    x = torch.ones(1, 5, 4)
    tracemalloc.start()
    t0 = time.perf_counter()
    out = iv.apply(x)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert time.perf_counter() - t0 < 1.0 and peak < 1 << 20
    assert torch.equal(out, torch.zeros_like(x))


@pytest.mark.parametrize("intervene, says", [
    ("blocks.1=scale:0@pos=1,2,3" + ",4" * 5000, "at most 4096"),
    ("blocks.1=scale:0@pos=9" * 1 + "9" * 30, "is not an index"),
    ("blocks.1=scale:0@pos=", "selector is empty"),
    ("blocks.1=scale:0@pos=1:2:3", "has a step"),
    ("blocks.1=scale:0@pos=__import__('os')", "is not an index"),
    ("blocks.1=scale:0@pos=1@pos=2", "given twice"),
    ("blocks.1=scale:0@rows=1", "suffixes are @pos=SEL"),
    ("blocks.1=scale:0@pos=40", "positions 40 is out of range"),
    ("blocks.1=scale:0@pos=30:40", "picks nothing"),
    ("blocks.0.attn=zero@heads=7", "heads 7 is out of range"),
    ("blocks.0.mlp=zero@heads=0", "attention modules only"),
    ("blocks.1=zero:3@units=4", "given twice"),
    ("blocks.1=patch@pos=all", "source input"),
])
def test_malformed_selectors_are_one_line(intervene, says, capsys):
    argv = [*LM, "--intervene", intervene]
    if "patch" in intervene:
        argv += ["--source-input", "text:a much longer prompt about the dog "]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("hookscope: error: "), err
    assert says in err and "Traceback" not in err, err


@pytest.mark.parametrize("at, says", [
    ({"positions": "1", "evil": "x"}, "unknown key"),
    ({"positions": {"__class__": "x"}}, "must be text"),
    ("@pos=1", "'at' must be an object"),
    ({"positions": True}, "must be text"),
    ({"heads": "1" * 100}, "is not an index"),
])
def test_a_session_files_at_is_checked(tmp_path, at, says, capsys):
    with pytest.raises(HookscopeError, match=says):
        from_dict({"kind": "scale", "factor": 0.5, "at": at})
    data = {"format": "hookscope-session", "version": 1, "model": {"spec": "demo:lm"},
            "plan": {"capture": [], "interventions": {"blocks.1": {"kind": "scale", "factor": 0.5,
                                                                    "at": at}}}}
    path = tmp_path / "at.hookscope.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    assert main(["run", "--session", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and says in err, err


def test_at_values_from_python_are_checked():
    for bad in ([True], [1.5], [object()], [], range(0, 10, 2)):
        with pytest.raises(HookscopeError):
            At(positions=bad)
    with pytest.raises(HookscopeError):
        Scale(0.5, at=At(heads=list(range(5000))))
