"""The benchmark suite runs end to end on a tiny model and reports what it should.

Correctness only: no timing is asserted (the figures depend on the machine).
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # bench/ lives at the repository root, outside the package
    sys.path.insert(0, str(ROOT))

from bench.__main__ import main  # noqa: E402
from bench.report import FIXED_COST_REGIME_MS  # noqa: E402
from bench.timing import memory_in_child  # noqa: E402

ROW_KEYS = {"case", "title", "model", "pairs", "median_ms", "plain_median_ms", "ratio",
            "ratio_q1", "ratio_q3", "ratio_min", "ratio_max", "target", "met", "miss"}




def run_bench(capsys, *args: str) -> str:
    assert main(["--quick", "--smoke", "--models", "demo:cnn", "--pairs", "2", "--repeats", "5",
                 "--no-memory", "--no-peers", *args]) == 0
    return capsys.readouterr().out


def test_json_has_every_case_with_its_figures(capsys):
    data = json.loads(run_bench(capsys, "--json"))
    assert {"torch", "device", "threads", "quick", "models", "competitors"} <= data["meta"].keys()
    assert data["meta"]["models"]["demo:cnn"]["params"] > 0
    rows = {(r["model"], r["case"]): r for r in data["rows"]}
    for case in ("plain_aa", "capture3", "clamp1", "every_leaf", "every_leaf_first",
                 "stats_only", "naive_detach", "naive_victims", "aminmax_ref", "naive_clone", "compare"):
        row = rows[("demo:cnn", case)]
        assert ROW_KEYS <= row.keys(), case
        assert "error" not in row, row.get("error")
        assert row["pairs"] >= 1 and row["ratio"] > 0
    # Hookscope's values are right; hand-written detach() captures are not (ReLU(inplace)).
    assert rows[("demo:cnn", "every_leaf")]["correct"] is True
    assert rows[("demo:cnn", "capture3")]["correct"] is True
    assert rows[("demo:cnn", "clamp1")]["correct"] is True
    assert rows[("demo:cnn", "stats_only")]["correct"] is True
    assert rows[("demo:cnn", "naive_detach")]["correct"] is False
    assert "stale" in rows[("demo:cnn", "naive_detach")]["check_note"]
    # Copying just the layers a later in-place op overwrites is correct (the cheapest
    # correct capture), and every-leaf capture is read against it too.
    victims = rows[("demo:cnn", "naive_victims")]
    assert victims["correct"] is True and "0 of " in victims["check_note"]
    assert int(victims["check_note"].split("; ")[-1].split()[0]) >= 1   # "N layers copied"
    assert victims["over_naive_detach"] == pytest.approx(statistics.median(
        victims["round_ratios"][i] - rows[("demo:cnn", "naive_detach")]["round_ratios"][i]
        for i in range(victims["pairs"])))
    assert "the cheapest correct capture" in rows[("demo:cnn", "every_leaf")]["note"]
    # The sweep case (here on the smoke shape): both Hookscope rows, timed against the plain
    # forward, the batched grid equal to the one-by-one grid to float32 rounding.
    sweep = data["meta"]["sweep"]
    assert sweep["meta"]["cells"] == sweep["meta"]["layers"] * sweep["meta"]["tokens"] > 0
    by_name = {r["name"]: r for r in sweep["rows"]}
    single, batched = by_name["hookscope sweep (one by one)"], by_name["hookscope sweep (batched)"]
    assert single["target"] == 1.10 and isinstance(single["met"], bool)
    assert single["ratio"] > 0 and batched["ratio"] > 0 and batched["seconds"] > 0
    assert float(batched["note"].rsplit("one by one| ", 1)[1]) < 1e-4
    # The generate case: a new shape's first compare() against a steady one on demo:lm and
    # the GPT-2 shape; generation against a cached generate(), the continuation without
    # the plan equal to generate()'s ids, with the KV cache used.
    gen = {r["name"].split(",")[0] if r["name"].startswith("new shape") else r["name"]: r
           for r in data["meta"]["generate"]["rows"]}
    shape_rows = [r for r in data["meta"]["generate"]["rows"] if r["name"].startswith("new shape")]
    assert len(shape_rows) == 2 and all(r["ref_ms"] > 0 and isinstance(r["met"], bool)
                                        for r in shape_rows)
    cached = next(r for n, r in gen.items() if n.startswith("generate") and "GPT-2" in n
                  and "no cache" not in n)
    assert cached["correct"] is True and "KV cache used" in cached["note"]
    assert cached["target"] == 3.0 and cached["ref_ms"] > 0
    assert gen["generate 20, demo:lm"]["target"] == 500.0
    # The sweep-estimate case: every cell estimated from one forward and one backward, timed
    # against the plain forward, its grid ranked like the exact one.
    est = data["meta"]["sweep_estimate"]
    by_name = {r["name"]: r for r in est["rows"]}
    row = by_name["hookscope sweep --estimate"]
    assert row["target"] == 5.0 and isinstance(row["met"], bool) and row["ratio"] > 0
    assert "1 forward with gradients" in row["note"]
    assert by_name["hookscope sweep (batched, exact)"]["ratio"] > 0
    assert -1 <= est["meta"]["spearman"] <= 1
    # ... and ResNet-18's blocks x channels zero-ablation grid, the same two rows
    rn = est["meta"]["resnet18"]
    assert rn["cells"] == rn["blocks"] * rn["units"] > 0 and -1 <= rn["spearman"] <= 1
    row = by_name["resnet18 channels --estimate"]
    assert row["target"] == 5.0 and isinstance(row["met"], bool) and row["ratio"] > 0
    assert "1 forward with gradients" in row["note"] and "Spearman" in row["note"]
    assert by_name["resnet18 channels (batched, exact)"]["ratio"] > 0
    # TransformerLens's attribution row: a note only under --no-peers.
    assert by_name["transformer_lens attribution"]["note"].startswith(
        "skipped: TransformerLens not run (--no-peers)")
    # The sweep-inputs case (smoke: 6 prompts x 2 strengths x 4 layers): the set against a
    # loop of single-input sweeps, the same grid.
    ins = data["meta"]["sweep_inputs"]
    set_row = next(r for r in ins["rows"] if r["name"] == "sweep over the input set")
    assert set_row["target"] == 5.0 and isinstance(set_row["met"], bool)
    assert set_row["speedup"] > 0 and ins["meta"]["inputs"] == 6
    assert ins["meta"]["max_abs_error"] < 1e-4
    # The diff case (smoke shapes): both models against their bfloat16 copies, every row a
    # small relative change, timed against the two plain forwards.
    diff_rows = {r["name"].split()[0]: r for r in data["meta"]["diff"]["rows"]}
    assert set(diff_rows) == {"resnet18", "gpt2"}
    for r in diff_rows.values():
        assert r["target"] == 1.3 and isinstance(r["met"], bool) and r["ratio"] > 0
        assert r["rows"] > 0 and 0 < r["relative_change"][0] <= r["relative_change"][2] < 0.05
    # Ratio targets are not judged on a forward of microseconds (fixed costs only):
    # the row says why instead of a yes/no.
    # (On a shared machine a demo forward can take far longer than usual, so the
    # regime is read from the row itself.)
    leaf = rows[("demo:cnn", "every_leaf")]
    if leaf["plain_median_ms"] < FIXED_COST_REGIME_MS:
        assert leaf["met"] is None and leaf["miss"].startswith("n/a")
    else:
        assert isinstance(leaf["met"], bool)
    # A floor target is read against its reference from the same rounds.
    assert leaf["floor_case"] == "naive_detach"
    # ... from each round's triple (plain, case and floor back to back) ...
    assert len(leaf["round_over_floor"]) == leaf["pairs"]
    assert leaf["over_floor"] == pytest.approx(statistics.median(leaf["round_over_floor"]))
    # ... while the estimate from the round's two separate pairs is kept beside it.
    assert leaf["over_floor_pairs"] == pytest.approx(
        statistics.median(leaf["round_ratios"][i] - rows[("demo:cnn", "naive_detach")]["round_ratios"][i]
                          for i in range(leaf["pairs"])))
    # ... and printed with the spread of those differences, which a reader needs to judge a miss.
    assert leaf["over_floor_q1"] <= leaf["over_floor"] <= leaf["over_floor_q3"]
    from bench.report import table
    assert f"{leaf['over_floor']:+.3f} [{leaf['over_floor_q1']:+.3f}–" in table([leaf])
    assert rows[("demo:cnn", "stats_only")]["floor_case"] == "aminmax_ref"
    fixed = {r["case"]: r for r in data["rows"] if r["model"] == "—"}
    assert {"compare_clamp", "arm_1000", "resolve_1000"} <= fixed.keys()
    assert isinstance(fixed["compare_clamp"]["met"], bool)
    assert fixed["arm_1000"]["median_ms"] > 0


def test_table_and_case_filter(capsys):
    out = run_bench(capsys, "--cases", "every_leaf,compare_clamp")
    lines = [ln for ln in out.splitlines() if ln.startswith("| ")]
    header = lines[0]
    for col in ("case", "model", "median ms", "ratio", "target", "met?", "correct"):
        assert col in header
    body = "\n".join(lines[2:])
    assert "every leaf kept" in body and "compare()" in body
    assert "stats only" not in body and "arm" not in body
    # The plain A/A row always runs: it is the noise floor every ratio carries.
    assert "plain vs plain" in body


def test_memory_case_child_process():
    fig = memory_in_child("demo:cnn", "every_leaf", quick=True, timeout=120)
    assert "error" not in fig, fig
    assert fig["peak_above_model_mib"] >= 0
    assert fig["captured_mib"] > 0


def test_live_memory_child_maps_every_tensor_block_and_sees_what_is_kept():
    from bench.timing import LIVE_MMAP_THRESHOLD, live_env

    env = live_env()
    assert env["HOOKSCOPE_KEEP_FREED_MEMORY"] == "0"
    assert env["MALLOC_MMAP_THRESHOLD_"] == str(LIVE_MMAP_THRESHOLD)
    # ResNet-18 quick (batch 2 x 112²) keeps ~7 MiB of captures: the live peak above
    # the model holds at least those bytes.
    fig = memory_in_child("resnet18", "every_leaf", quick=True, timeout=180, live=True)
    assert "error" not in fig, fig
    assert fig["captured_mib"] > 1
    assert fig["peak_above_model_mib"] >= fig["captured_mib"]


def test_judged_memory_is_the_median_of_fresh_processes_and_a_live_peak(monkeypatch):
    import bench.__main__ as entry
    from bench.cases import Case, Target

    peaks = iter([30.0, 10.0, 20.0, 99.0])
    calls = []

    def child(model, case, quick, live=False):
        calls.append((case, live))
        return {"peak_above_model_mib": 7.5 if live else next(peaks), "captured_mib": 0.0}

    monkeypatch.setattr(entry, "memory_in_child", child)
    a = entry.parse_args(["--memory-runs", "3"])
    judged = Case("stats_only", "t", lambda: None, Target("floor", 0.05, memory="stats", floor="x"))
    row: dict = {}
    entry.memory(row, judged, "demo:cnn", a)
    assert calls == [("stats_only", False)] * 3 + [("stats_only", True)]
    assert row["peak_above_model_mib"] == 20.0 and row["peak_runs_mib"] == [10.0, 20.0, 30.0]
    assert row["live_peak_mib"] == 7.5
    context = Case("naive_clone", "t", lambda: None)  # no memory target: one process, no live one
    row = {}
    entry.memory(row, context, "demo:cnn", a)
    assert calls[4:] == [("naive_clone", False)] and row["peak_above_model_mib"] == 99.0
    assert "live_peak_mib" not in row


def test_memory_targets_are_judged_on_the_live_peak_where_both_rows_have_one():
    from bench.cases import Target
    from bench.report import judge

    stats = Target("floor", 0.05, memory="stats", floor="x")
    plain = {"peak_above_model_mib": 80.0, "live_peak_mib": 50.0}
    # Resident: 100 > 1.1 x 80 (a heap layout); live: 53 <= 1.1 x 50.
    row = {"over_floor": 0.0, "ratio": 1.0, "plain_median_ms": 100.0,
           "peak_above_model_mib": 100.0, "live_peak_mib": 53.0}
    judge(row, stats, plain)
    assert row["mem_met"] is True and row["mem_basis"] == "live"
    assert row["mem_limit_mib"] == pytest.approx(55.0)
    row = {**row, "live_peak_mib": 56.0}
    judge(row, stats, plain)
    assert row["mem_met"] is False
    # Without the plain forward's live figure, the resident ones are compared.
    row = {"over_floor": 0.0, "ratio": 1.0, "plain_median_ms": 100.0,
           "peak_above_model_mib": 100.0, "live_peak_mib": 53.0}
    judge(row, stats, {"peak_above_model_mib": 80.0})
    assert row["mem_met"] is False and row["mem_basis"] == "resident"


def test_what_a_case_leaves_in_reference_cycles_is_gone_before_the_next_case_runs():
    # TorchLens's trace leaves its activations in cycles; with the collector off for a
    # whole round they piled up and made glibc trim the heap under the next cases.
    import weakref

    from bench.timing import Timed, shuffled_rounds

    class Cycle:
        def __init__(self):
            self.me = self

    alive: list[weakref.ref] = []
    seen_alive: list[bool] = []

    def leaves_a_cycle():
        obj = Cycle()
        alive.append(weakref.ref(obj))

    def looks():
        seen_alive.append(any(r() is not None for r in alive))

    cases = {"cycle": Timed(plain=lambda: None, fn=leaves_a_cycle),
             "look": Timed(plain=looks, fn=looks)}
    shuffled_rounds(cases, rounds=6, warm_s=0.0)
    assert len(seen_alive) >= 12 + 4  # warm-up (2 pairs) and 6 rounds of a pair
    assert not any(seen_alive[4:])  # every timed call of "look" found the cycles collected


def test_the_nnsight_peer_is_checked_against_the_clone_reference():
    pytest.importorskip("nnsight")
    from bench.competitors import _nnsight_case
    from bench.models import build

    bm = build("demo:cnn", quick=True)
    case = _nnsight_case(bm, "test")
    ok, note = case.check(case.fn())
    # demo:cnn's ReLU(inplace=True) overwrites two saved outputs: nnsight keeps references
    assert not ok and note.startswith("2 of 10 captures stale"), note


def test_transformer_lens_attribution_patching_equals_the_sweep_estimate():
    """TransformerLens's attribution-patching recipe (the sweep-estimate case's peer row) and
    ``sweep(..., estimate=True)`` compute the same first-order quantity on the same weights:
    the estimate is the metric on the corrupted run plus the attribution."""
    pytest.importorskip("transformer_lens")
    from bench.sweep_bench import resid_pre_grid
    from bench.tl_peer import resid_pre_attribution, tl_gpt2
    from hookscope.core.analyses import sweep

    g = resid_pre_grid(quick=False, smoke=True)
    est = sweep(g.model, g.corrupted, g.over, g.template, g.metric, estimate=True).estimates
    attr, corrupted_metric = resid_pre_attribution(
        tl_gpt2(g.model), g.clean, g.corrupted,
        lambda logits: logits[0, -1, g.a_tok] - logits[0, -1, g.b_tok])
    assert attr.shape == est.shape == (g.layers, g.tokens)
    assert np.ptp(est) > 0.1  # the patched positions move the metric
    np.testing.assert_allclose(attr.double().numpy() + corrupted_metric, est, atol=1e-5)


@pytest.mark.parametrize("peer", ["nnsight", "torchlens"])
def test_a_peer_runs_on_its_own_copy_of_the_model(peer):
    """NNsight(model) puts its own ``forward`` on every module and leaves it there; on the
    shared model, every later Hookscope case ran with it (and copied the BatchNorm
    victims it otherwise remakes)."""
    pytest.importorskip(peer)
    from bench import competitors
    from bench.models import build

    bm = build("demo:cnn", quick=True)
    before = {n: dict(m.__dict__) for n, m in bm.module.named_modules()}
    case = competitors.BUILDERS[peer](bm, "test")
    case.fn()
    for n, m in bm.module.named_modules():
        assert "forward" not in m.__dict__, n
        assert m._forward_hooks == before[n]["_forward_hooks"], n
        assert m._forward_pre_hooks == before[n]["_forward_pre_hooks"], n
