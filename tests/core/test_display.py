"""Display-ready numbers (core.views' prepare_display): made once per result in the
runner's thread when the front end draws, and the same numbers the views' own
functions give."""

from __future__ import annotations

import dataclasses

import numpy as np
import torch

from hookscope.core import Clamp, Plan, Scale, compare, load_model, parse_input
from hookscope.core.engine import reference_of
from hookscope.core.session.runner import Finished, LocalRunner, RunRequest
from hookscope.core.views import (ResultDisplay, ValueSpread, common_bins, describe_outputs, flat_array,
                                  input_token_strings, largest_finite, log_histogram,
                                  prepare_display, wants_log)

from runner_doubles import Recorder


def _result(spec: str, plan: Plan):
    lm = load_model(spec)
    return lm, compare(lm.module, lm.example_input, plan)


def test_a_result_without_its_input_gets_it_parsed_once_here():
    # A remote run may come back without the input it ran on: the display parses it
    # (in the runner's thread), so the GUI thread never has to.
    lm, r = _result("demo:lm", Plan(capture=("blocks.0",)))
    r.inputs = None
    d = prepare_display(r, reference_of, lm.meaning, "text:the cat", lm.example_input)
    want = parse_input("text:the cat", lm.example_input, lm.meaning.codec)
    assert torch.equal(d.inputs, want)
    assert d.tokens == input_token_strings(want, lm.meaning) and d.tokens
    np.testing.assert_array_equal(d.without, flat_array(r.output_without))
    np.testing.assert_array_equal(d.with_, flat_array(r.output_with))
    assert d.description == describe_outputs(r.output_without, r.output_with, lm.meaning, want)


def test_each_record_gets_its_spread_bins_and_log_bins():
    lm, r = _result("demo:cnn", Plan(capture=("conv1", "relu1", "fc"),
                                     interventions={"conv1": Clamp(-0.3, 0.3)}))
    d = prepare_display(r, reference_of, lm.meaning, "example", lm.example_input)
    assert isinstance(d, ResultDisplay) and d.input_picture is not None   # the digit's thumbnail
    for path in ("conv1", "relu1", "fc"):
        rec = r.captures[path][0]
        got = d.for_record(rec)
        assert got is not None
        pre_t, pre_s, _ = reference_of(rec)
        tensors = [t for t in (rec.tensor, pre_t) if t is not None]
        spread = ValueSpread(*tensors, largest=largest_finite(rec.stats, pre_s))
        assert (got.spread.decades, got.spread.typical) == (spread.decades, spread.typical)
        want = common_bins(rec.stats, pre_s, rec.tensor)
        assert (got.common_counts is None) == (want is None)
        if wants_log(spread.decades):
            edges, counts = log_histogram(tensors, spread.typical)
            np.testing.assert_array_equal(got.log_bins[0], edges)
        else:
            assert got.log_bins is None
    # A statistics-only record has nothing to draw beyond its statistics.
    stats_only = compare(lm.module, lm.example_input,
                         Plan(capture=("conv1",), keep_tensors=False))
    assert prepare_display(stats_only, reference_of, lm.meaning).records == {}


def test_common_bins_put_the_values_after_in_the_bins_of_those_before():
    lm, r = _result("demo:features", Plan(capture=("fc1",), interventions={"fc1": Scale(0.5)}))
    rec = r.captures["fc1"][0]
    pre_s = reference_of(rec)[1]
    # Make the bins differ as a run with its own edges would: then they are recounted.
    own = dataclasses.replace(rec.stats, hist_edges=np.linspace(rec.stats.min, rec.stats.max, 9))
    counts = common_bins(own, pre_s, rec.tensor)
    assert counts is not None and counts.sum() == rec.tensor.numel()
    want, _ = np.histogram(np.clip(rec.tensor.reshape(-1).numpy(), pre_s.hist_edges[0],
                                   pre_s.hist_edges[-1]), bins=np.asarray(pre_s.hist_edges))
    np.testing.assert_array_equal(counts, want)


def test_the_runner_attaches_the_display_only_for_a_front_end_that_draws():
    lm = load_model("demo:clamp")
    rec = Recorder()
    runner = LocalRunner(rec, progress_every_s=0)
    try:
        plan = Plan(capture=("0",), interventions={"0": Clamp(-0.5, 0.5)})
        runner.submit(RunRequest(lm, "example", plan))
        plain = rec.next_final()
        runner.make_display = True
        runner.submit(RunRequest(lm, "example", plan))
        drawn = rec.next_final()
    finally:
        runner.close()
    assert isinstance(plain, Finished) and plain.result.display is None
    assert isinstance(drawn, Finished) and isinstance(drawn.result.display, ResultDisplay)
    assert drawn.result.display.for_record(drawn.result.captures["0"][0]) is not None
