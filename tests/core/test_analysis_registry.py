"""The registry of analyses: what it accepts, what it refuses, and requests typed as text."""

from dataclasses import dataclass
from typing import ClassVar

import pytest

from hookscope.core import HookscopeError
from hookscope.core.analyses import (Analysis, AnalysisResult, AttentionRequest, AttentionResult,
                                     DiffRequest, DiffResult, GenerateRequest, LensRequest, LensResult,
                                     SaeRequest, ScanJob, SweepRequest, analysis_from_text,
                                     get_analysis, register_analysis, registered_analyses,
                                     unregister_analysis)


def test_the_built_in_analyses_are_registered_and_follow_the_protocol():
    assert registered_analyses() == {"lens": LensRequest, "generation": GenerateRequest,
                                     "sae": SaeRequest, "sweep": SweepRequest, "scan": ScanJob,
                                     "attention": AttentionRequest, "diff": DiffRequest}
    for request in (LensRequest(), GenerateRequest(2), SaeRequest(("blocks.0",)),
                    SweepRequest({"f": [1.0]}, {"fc1": "scale:{f}"}),
                    AttentionRequest(("blocks.0.attn",))):
        assert isinstance(request, Analysis)
    assert isinstance(DiffRequest(b_spec="demo:lm"), Analysis)
    assert issubclass(LensResult, AnalysisResult) and issubclass(AttentionResult, AnalysisResult)
    assert issubclass(DiffResult, AnalysisResult)


@dataclass(frozen=True)
class Knobs:
    """Every kind of field the command line can write."""

    n: int
    scale: float = 1.0
    label: str = "x"
    on: bool = False
    layers: tuple[str, ...] = ()
    limit: int | None = None
    name: ClassVar[str] = "knobs"

    def compute(self, module, inputs, plan, device, meaning, should_stop=None):
        return self


@pytest.fixture
def knobs():
    register_analysis(Knobs)
    yield
    unregister_analysis("knobs")


def test_text_is_read_as_each_fields_type(knobs):
    got = analysis_from_text("knobs", {"n": "3", "scale": "0.5", "label": "a b ", "on": "yes",
                                       "layers": "fc1, fc2", "limit": "none"})
    assert got == Knobs(3, 0.5, "a b ", True, ("fc1", "fc2"), None)
    assert analysis_from_text("Knobs ", {"n": "1", "limit": "7"}) == Knobs(1, limit=7)


@pytest.mark.parametrize("values, words", [
    ({}, "knobs needs n: give --param n=VALUE"),
    ({"n": "two"}, "n must be int, got 'two'"),
    ({"n": "1", "on": "maybe"}, "on must be true or false, got 'maybe'"),
    ({"n": "1", "limit": "lots"}, "limit must be one of"),
    ({"n": "1", "size": "2"}, "knobs takes no parameter 'size'; its parameters are n, scale"),
])
def test_bad_text_is_refused_with_what_to_write(knobs, values, words):
    with pytest.raises(HookscopeError, match=words.replace("(", r"\(")):
        analysis_from_text("knobs", values)


def test_the_registry_refuses_what_is_not_an_analysis(knobs):
    @dataclass
    class Loose:  # not frozen
        name: ClassVar[str] = "loose"

        def compute(self, *a):
            return None

    with pytest.raises(TypeError, match="frozen dataclass"):
        register_analysis(Loose)

    @dataclass(frozen=True)
    class Other:
        name: ClassVar[str] = "knobs"

        def compute(self, *a):
            return None

    with pytest.raises(ValueError, match="already registered"):
        register_analysis(Other)
    assert get_analysis("knobs") is Knobs
    with pytest.raises(HookscopeError, match="unknown analysis 'nope'; the analyses are"):
        get_analysis("nope")
