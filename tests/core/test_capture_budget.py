"""Statistics-only is chosen when the captured tensors would pass a memory budget."""

import scale_models

from hookscope.core import Plan, compare
from hookscope.core.analyses.capture_budget import (choose_capture_mode, fit_plan_to_budget,
                                                   kept_bytes)


def test_kept_bytes_is_what_a_run_keeps():
    module, x = scale_models.mlp_stack()
    plan = Plan(capture=("0", "2.lin", "6"), clamp={"2.lin": (-0.1, 0.1)})
    assert kept_bytes(module, x, plan) == compare(module, x, plan).captured_bytes


def test_over_budget_turns_to_statistics_only_with_a_note():
    module, x = scale_models.mlp_stack()
    plan = Plan(capture=("0", "1", "2"))
    need = kept_bytes(module, x, plan)
    fits = fit_plan_to_budget(module, x, plan, budget=need)
    assert fits.plan.keep_tensors and fits.note is None and fits.kept_bytes == need
    over = fit_plan_to_budget(module, x, plan, budget=need - 1)
    assert not over.plan.keep_tensors and over.note is not None
    assert "statistics only" in over.note and "--memory-budget" in over.note
    # The statistics are the same either way; only the tensors are not kept.
    keep, stats = compare(module, x, plan), compare(module, x, over.plan)
    for path in plan.capture:
        assert stats.captures[path][0].tensor is None
        assert stats.captures[path][0].stats.mean == keep.captures[path][0].stats.mean
    assert stats.captured_bytes == 0


def test_a_plan_that_keeps_nothing_is_left_alone():
    plan = Plan(capture=("0",), keep_tensors=False)
    assert choose_capture_mode(plan, 10**12, 1).plan is plan
    module, x = scale_models.mlp_stack()
    assert fit_plan_to_budget(module, x, Plan(), budget=0).note is None
