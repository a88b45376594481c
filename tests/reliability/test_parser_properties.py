"""Property tests: whatever text a person types, the parsers answer with a project error or a
value, never a raw exception (bounded examples, no deadline: the suite must stay fast)."""

from __future__ import annotations

import string

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hookscope.app.options import parse_clamp
from hookscope.core import HookscopeError, PlanError, load_model, parse_input
from hookscope.core.model.budget import parse_size

FAST = settings(max_examples=60, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.function_scoped_fixture])

# Text a person might type or paste: printable, control characters, line separators, NUL.
ODD = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=80)
NUMBERISH = st.text(alphabet="0123456789.-+eEinfINFxX[](), :=jJ_", max_size=60)
SHAPE = st.lists(st.integers(-3, 2_000_000), min_size=0, max_size=6).map(lambda s: "x".join(map(str, s)))
OPTION = st.sampled_from(["", ":seed=1", ":seed=-5", ":seed=99999999999999999999", ":dtype=int",
                          ":dtype=bool", ":dtype=bogus", ":high=0", ":high=-3", ":high=1e3", ":x"])


def _only_project_errors(call):
    try:
        call()
    except HookscopeError:
        pass


@FAST
@given(text=st.one_of(ODD, NUMBERISH, st.builds(lambda s, o: f"random:{s}{o}", SHAPE, OPTION)))
def test_parse_input_raises_only_project_errors(text, monkeypatch):
    monkeypatch.setenv("HOOKSCOPE_MAX_INPUT_BYTES", "1M")  # big shapes are refused, not built
    _only_project_errors(lambda: parse_input(text))
    _only_project_errors(lambda: parse_input(text, torch.zeros(1, 3, dtype=torch.long)))


@FAST
@given(depth=st.integers(1, 3000), opener=st.sampled_from(["[", "(", "-", "+", "~", "not "]))
def test_deep_literals_are_refused_cleanly(depth, opener):
    closer = {"[": "]", "(": ",)"}.get(opener, "")
    _only_project_errors(lambda: parse_input(opener * depth + "1" + closer * depth))


@FAST
@given(name=ODD, kind=st.sampled_from(["demo:{}", "{}.pt2", "{}.pt", "{}.py", "{}.py:make",
                                       "{}.py:{}", "{}"]))
def test_load_model_spec_parsing_raises_only_project_errors(name, kind, tmp_path_factory, monkeypatch):
    # Inside an empty folder, so a spec can only name files that are not there. No ':' in
    # the generated part: a "module:function" spec would import whatever module it names.
    monkeypatch.chdir(tmp_path_factory.mktemp("specs"))
    name = name.replace(":", "_")
    _only_project_errors(lambda: load_model(kind.format(name, name)))


@FAST
@given(text=st.one_of(ODD, NUMBERISH, st.builds(lambda a, b: f"0={a}:{b}", NUMBERISH, NUMBERISH)))
def test_clamp_parsing_raises_only_plan_errors(text):
    try:
        path, (lo, hi) = parse_clamp(text)
    except PlanError:
        return
    assert isinstance(lo, float) and isinstance(hi, float) and path


@FAST
@given(text=st.one_of(ODD, st.text(alphabet=string.digits + ".KMGTiBkmgt ", max_size=12)))
def test_budget_sizes_parse_or_say_why(text):
    try:
        assert parse_size(text) >= 0
    except HookscopeError:
        pass
