"""A pool of Ray actors: map in order, a dead worker's items retried or named, sweeps equal
to the local ones cell for cell.

A local Ray instance is started once for this file (``num_cpus=2``; the tests' own pools
reserve no CPU, so the CLI's pool, one CPU per worker, still fits) and shut down after it. The tasks live in a file of a
folder shipped as the Ray job's working_dir (as a cluster would get them), so the workers
import them by name, as the contract asks.
"""

from __future__ import annotations

import io
import json
import sys
import threading
import time

import numpy as np
import pytest
import torch

from hookscope.core import load_model, parse_input
from hookscope.core.base.errors import ForwardError, PlanError
from hookscope.core.analyses.sweep import sweep

ray = pytest.importorskip("ray", reason="ray is not installed (pip install 'hookscope[ray]')")
# Each test may start Ray or workers: processes that take long to start on a loaded machine.
pytestmark = [pytest.mark.ray, pytest.mark.timeout(300)]

from hookscope.core.remote import PoolError, PoolModel, PoolTaskError, RayPool  # noqa: E402
from hookscope.core.remote.remote_ray import connect  # noqa: E402

PROMPT = "text:the cat sat on the "
SOURCE = "text:the dog sat on the "

TASKS = '''
import os
import time
from dataclasses import dataclass

import ray
import torch

from hookscope.core import Plan, compare
from hookscope.core.base.errors import PlanError
from hookscope.core.plan.interventions import Scale


def output_sum(loaded, seed):
    """The model's output on a random input of the example's shape, summed."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(loaded.example_input.shape, generator=g)
    with torch.inference_mode():
        return float(loaded.module(x).double().sum())


def refuse_two(loaded, item):
    if item == 2:
        raise PlanError("two is refused here")
    return item


def held_at(loaded, item, stuck):
    """Item ``stuck`` tells the gate which worker holds it and waits there (to be killed)
    the first ``times`` it arrives; every other item is its own square."""
    if item == stuck:
        gate = ray.get_actor("pool-test-gate")
        if ray.get(gate.arrive.remote(os.getpid())):
            time.sleep(120)
    return item * item


class Gate:
    def __init__(self, times):
        self.times = times
        self.arrivals = []

    def arrive(self, pid):
        self.arrivals.append(pid)
        return len(self.arrivals) <= self.times

    def holders(self):
        return list(self.arrivals)


@dataclass(frozen=True)
class Brittle(Scale):
    def apply_tensor(self, t, ctx):
        if self.factor == 2.0:
            raise ValueError("brittle at two")
        return super().apply_tensor(t, ctx)


def brittle(f):
    return Brittle(f)
'''


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    d = tmp_path_factory.mktemp("pool_tasks")
    (d / "pool_tasks.py").write_text(TASKS)
    sys.path.insert(0, str(d))
    yield d
    sys.path.remove(str(d))
    sys.modules.pop("pool_tasks", None)


@pytest.fixture(scope="module")
def ray_local(folder):
    connect("local", working_dir=folder, num_cpus=2, include_dashboard=False)
    yield ray
    ray.shutdown()


@pytest.fixture(scope="module")
def lm_pool(ray_local):
    with RayPool("local", "demo:lm", 2, num_cpus=0) as pool:
        yield pool


@pytest.fixture(scope="module")
def cnn_pool(ray_local):
    with RayPool("local", "demo:cnn", 2, num_cpus=0) as pool:
        yield pool


@pytest.fixture
def gate(ray_local):
    def make(times):
        g = ray.remote(tasks().Gate).options(name="pool-test-gate", num_cpus=0).remote(times)
        made.append(g)
        return g
    made: list = []
    yield make
    for g in made:
        ray.kill(g)


def tasks():
    import pool_tasks

    return pool_tasks


def test_map_returns_every_result_in_the_items_order(cnn_pool):
    t = tasks()
    cnn = load_model("demo:cnn")
    arrived = []
    got = cnn_pool.map(t.output_sum, range(7), on_result=lambda i, r: arrived.append(i))
    assert got == [t.output_sum(cnn, seed) for seed in range(7)]
    assert sorted(arrived) == list(range(7))
    assert {ray.get(w.ping.remote())["pid"] for w in cnn_pool.workers}.__len__() == 2


def test_a_dataset_scan_runs_unchanged_and_merges_to_the_whole(cnn_pool):
    """The datasets' unit of work, scan_shard(loaded, shard, request) -> partial, on the
    pool as it is; the merged partials equal one scan here."""
    import math
    from pathlib import Path

    from hookscope.core.analyses import ScanRequest, finish, merge, scan, scan_shard, shards
    from hookscope.core.dataset import open_inputs

    cnn = load_model("demo:cnn")
    digits = Path(__file__).resolve().parents[2] / "resources" / "digits_test.safetensors"
    # one input a batch (a budget of one byte), so both see bit-identical activations
    req = ScanRequest(open_inputs(digits), capture=("conv2",), intervene={"conv2": "zero:3"},
                      top_k=9, budget_bytes=1, limit=60)
    whole = scan(cnn, req)
    merged = finish(merge(cnn_pool.map(scan_shard, shards(60, 13), req)), req, cnn.meaning)
    a, b = merged.layer("conv2"), whole.layer("conv2")
    assert np.array_equal(a.top_index, b.top_index) and np.array_equal(a.top_values, b.top_values)
    assert np.array_equal(a.hist_counts, b.hist_counts) and a.count == b.count
    assert math.isclose(a.mean, b.mean, rel_tol=1e-12) and math.isclose(a.std, b.std, rel_tol=1e-12)
    assert merged.per_class() == whole.per_class() and merged.rows == whole.rows


def test_a_task_that_raises_names_the_item_and_keeps_its_kind(cnn_pool):
    t = tasks()
    with pytest.raises(PoolTaskError, match="cell #2: two is refused here") as info:
        cnn_pool.map(t.refuse_two, range(4), names=lambda i: f"cell #{i}")
    assert isinstance(info.value.__cause__, PlanError)
    assert info.value.missing == ["cell #2"]
    assert cnn_pool.map(t.refuse_two, [0, 1]) == [0, 1]  # the pool is still whole


def test_a_task_that_cannot_travel_is_refused_with_what_to_do(cnn_pool):
    lock = threading.Lock()
    with pytest.raises(PoolError, match="top-level function and picklable arguments"):
        cnn_pool.map(tasks().refuse_two, [0], lock)


def _pids(pool) -> dict[int, object]:
    """Each worker by its process id (asked before a map: a busy worker answers after it)."""
    return {ray.get(w.ping.remote())["pid"]: w for w in pool.workers}


def _kill_holders(gate, workers: dict, want: int, timeout_s: float = 60.0) -> list[int]:
    """Kill each worker that arrives at the gate holding the stuck item, ``want`` times."""
    killed: list[int] = []
    deadline = time.monotonic() + timeout_s
    while len(killed) < want and time.monotonic() < deadline:
        for pid in ray.get(gate.holders.remote()):
            if pid not in killed and pid in workers:
                ray.kill(workers[pid])
                killed.append(pid)
        time.sleep(0.05)
    return killed


def test_a_worker_killed_mid_map_loses_nothing(ray_local, gate):
    g = gate(1)
    t = tasks()
    with RayPool("local", "demo:clamp", 2, num_cpus=0) as pool:
        out: list = []
        workers = _pids(pool)
        th = threading.Thread(target=lambda: out.append(pool.map(t.held_at, range(8), 3)))
        th.start()
        killed = _kill_holders(g, workers, 1)
        th.join(120)
        assert len(killed) == 1
        assert out == [[i * i for i in range(8)]]  # complete, in order, item 3 run again
        assert len(ray.get(g.holders.remote())) == 2 and pool.size == 1


def test_when_every_retry_dies_the_error_names_the_missing_cells(ray_local, gate):
    g = gate(2)
    t = tasks()
    with RayPool("local", "demo:clamp", 2, num_cpus=0, max_retries=1) as pool:
        raised: list = []

        def run() -> None:
            try:
                pool.map(t.held_at, range(6), 3, names=lambda i: f"cell {i}")
            except PoolError as exc:
                raised.append(exc)

        workers = _pids(pool)
        th = threading.Thread(target=run)
        th.start()
        killed = _kill_holders(g, workers, 2)
        th.join(120)
        assert len(killed) == 2 and pool.size == 0
        err = raised[0]
        assert "cell 3" in err.missing and "cell 3" in str(err)
        assert "were not computed" in str(err)
        assert "cell 0" not in err.missing  # what was computed before is not reported missing


def assert_same_sweep(got, want, exact=True):
    """Equal cell for cell: bit for bit when neither batched (each cell its own comparison);
    batched, to float rounding (a worker's batches hold other rows than the local ones)."""
    assert got.axes == want.axes and got.coords == want.coords
    if exact:
        assert np.array_equal(got.values, want.values)
    else:
        np.testing.assert_allclose(got.values, want.values, rtol=1e-5, atol=1e-5)
    assert got.baseline == want.baseline and got.metric == want.metric
    assert list(got.receipts) == list(want.receipts)
    for idx, receipts in want.receipts.items():
        mine = {k: r.to_json_dict() for k, r in got.receipts[idx].items()}
        theirs = {k: r.to_json_dict() for k, r in receipts.items()}
        if not exact:  # what fired and what it changed; the output's change only to rounding
            keep = ("path", "intervention", "fired_calls", "changed")
            mine = {k: {f: d[f] for f in keep} for k, d in mine.items()}
            theirs = {k: {f: d[f] for f in keep} for k, d in theirs.items()}
        assert mine == theirs


def test_a_layers_by_positions_patching_grid_equals_the_local_sweep(lm_pool):
    lm = load_model("demo:lm")
    x = parse_input(PROMPT, lm.example_input, lm.meaning.codec)
    over = {"layer": "blocks.*", "pos": "all"}
    iv = {"{layer}": f"patch:{SOURCE}@pos={{pos}}"}
    seen: list = []
    got = lm_pool.sweep(PROMPT, over, iv, "kl", progress=lambda d, n: seen.append((d, n)),
                        batch=False)
    want = sweep(lm.module, x, over, iv, "kl", meaning=lm.meaning, batch=False)
    assert_same_sweep(got, want)
    assert_same_sweep(lm_pool.sweep(PROMPT, over, iv, "kl"),
                      sweep(lm.module, x, over, iv, "kl", meaning=lm.meaning), exact=False)
    assert seen[-1] == (want.cells, want.cells) and len(seen) == 8  # 4 parts per worker
    assert got.forwards["intervened"] == want.cells
    r = got.run_cell(layer="blocks.1", pos=5)  # a cell again, in full, on a worker
    ref = want.run_cell(layer="blocks.1", pos=5)
    assert torch.equal(r.output_with, ref.output_with)


@pytest.mark.parametrize("over, intervene, metric", [
    ({"layer": "conv1,conv2", "unit": "0:4"}, {"{layer}": "zero@units={unit}"}, "prob:#3"),
    ({"factor": "linspace(0,2,5)"}, {"conv2": "scale:{factor}"}, "max-abs-diff"),
])
def test_cnn_grids_and_a_strength_curve_equal_the_local_sweep(cnn_pool, over, intervene, metric):
    cnn = load_model("demo:cnn")
    for batch in (False, True):
        got = cnn_pool.sweep(None, over, intervene, metric, batch=batch)
        assert_same_sweep(got, sweep(cnn.module, cnn.example_input, over, intervene, metric,
                                     meaning=cnn.meaning, batch=batch), exact=not batch)


def test_a_cell_that_fails_in_a_worker_is_named(cnn_pool):
    with pytest.raises(ForwardError, match=r"^cell f=2.0: the model's forward failed.*brittle "
                                           r"at two") as info:
        cnn_pool.sweep(None, {"f": [0.5, 1.0, 2.0, 3.0]}, {"conv2": tasks().brittle})
    assert isinstance(info.value.__cause__, PoolTaskError)


def test_bad_templates_fail_once_before_any_cell_as_locally(cnn_pool):
    with pytest.raises(PlanError, match="^sweep axis 'unit' appears in no template"):
        cnn_pool.sweep(None, {"layer": "conv1", "unit": "0:2"}, {"{layer}": "zero"})


def test_session_sweep_over_a_pool_equals_the_session_sweep(lm_pool):
    from hookscope.core import HookscopeError, Session

    s = Session.load("demo:lm", input_text=PROMPT)
    try:
        over, iv = {"layer": "blocks.*", "pos": "15:19"}, {"{layer}": f"patch:{SOURCE}@pos={{pos}}"}
        seen: list = []
        got = s.sweep(over, iv, "kl", pool=lm_pool, progress=lambda d, n: seen.append((d, n)))
        assert_same_sweep(got, s.sweep(over, iv, "kl"))
        assert seen[-1] == (8, 8)
        with pytest.raises(PlanError, match="over the limit of 3"):
            s.sweep({"pos": "all"}, {"blocks.0": "zero@pos={pos}"}, max_cells=3, pool=lm_pool)
    finally:
        assert s.close()
    other = Session.load("demo:cnn")
    try:
        with pytest.raises(HookscopeError, match="the pool's workers hold 'demo:lm'"):
            other.sweep({"unit": "0:2"}, {"conv1": "zero@units={unit}"}, pool=lm_pool)
    finally:
        assert other.close()


PROMPTS = "the cat sat on the\na dog ran to the\nmy bird is on\nthe sun is up\nwe go to the\n"


def _close(a, b) -> bool:
    """Equal to float rounding (a batched forward's rows, a backward on another thread count)."""
    return np.allclose(np.array(a, dtype=float), np.array(b, dtype=float), rtol=1e-5, atol=1e-6,
                       equal_nan=True)


def assert_same_set_sweep(got, want, exact=True):
    """Equal input by input (per_input), and the mean and spread with them: bit for bit
    where neither side batched, batched to float rounding. The estimates (a backward in a
    worker, whose thread count differs from this process's) to float rounding, the
    verified cells the same cells with the same values."""
    assert got.axes == want.axes and got.coords == want.coords and got.inputs == want.inputs
    same = (lambda a, b: np.array_equal(a, b, equal_nan=True)) if exact else _close
    for name in ("values", "spread", "per_input"):
        a, b = getattr(got, name), getattr(want, name)
        assert a.shape == b.shape and same(a, b), name
    for name in ("estimates", "estimates_per_input"):
        a, b = getattr(got, name), getattr(want, name)
        assert (a is None) == (b is None) and (a is None or _close(a, b)), name
    assert got.baseline == want.baseline if exact else np.isclose(got.baseline, want.baseline)
    assert (got.verified is None) == (want.verified is None)
    if want.verified is not None:
        assert got.verified["cells"] == want.verified["cells"]
        assert same(np.array(got.verified["values"], dtype=float),
                    np.array(want.verified["values"], dtype=float))
        assert _close(got.verified["estimates"], want.verified["estimates"])
        assert np.isclose(got.verified["spearman"], want.verified["spearman"])


def test_input_sets_and_estimates_on_a_pool_equal_the_local_sweeps(lm_pool, tmp_path):
    """An input set's inputs in shards over the workers, estimates per input averaged and
    the verified cells on the pool, a single input's estimate on one worker and its verified
    cells over the pool, and Session.sweep(pool=) over a set: the local numbers."""
    from hookscope.core import InputError, Session
    from hookscope.core.dataset import open_inputs, read_items

    lm = load_model("demo:lm")
    prompts = tmp_path / "prompts.txt"
    prompts.write_text(PROMPTS)
    iset = open_inputs(prompts)
    items = read_items(iset, range(len(iset)), lm.example_input, lm.meaning.codec)
    names = [iset.describe(i) for i in range(len(iset))]
    # estimates well apart (scaling a layer moves the metric in proportion to f - 1), so the
    # cells an estimate ranks first are the same whatever its rounding
    over = {"layer": "blocks.0.attn,blocks.0.mlp", "f": "0,0.3,0.6,1.2,2.5"}
    iv = {"{layer}": "scale:{f}"}

    def local(**kw):
        return sweep(lm.module, None, over, iv, "logit:e", meaning=lm.meaning, input_set=items,
                     input_names=names, **kw)

    seen: list = []
    got = lm_pool.sweep_inputs(iset, over, iv, "logit:e", batch=False,
                               progress=lambda d, n: seen.append((d, n)))
    assert_same_set_sweep(got, local(batch=False))  # every cell its own forward: bit for bit
    assert seen[-1] == (5 * 10, 5 * 10) and len(seen) == 5  # a shard an input (2 workers x 4)
    cell = dict(layer="blocks.0.mlp", f=0.6)
    assert got.plan_of(**cell) == local(batch=False).plan_of(**cell)
    assert_same_set_sweep(lm_pool.sweep_inputs(iset, over, iv, "logit:e"), local(), exact=False)
    est = lm_pool.sweep_inputs(iset, over, iv, "logit:e", batch=False, estimate=True, verify=3)
    want = local(batch=False, estimate=True, verify=3)
    assert_same_set_sweep(est, want)
    assert len(want.verified["cells"]) == 3 and np.isfinite(want.estimates).all()
    assert est.forwards["gradient"] == 5

    x = parse_input(PROMPT, lm.example_input, lm.meaning.codec)
    one = lm_pool.sweep(PROMPT, over, iv, "logit:e", batch=False, estimate=True, verify=4)
    mine = sweep(lm.module, x, over, iv, "logit:e", meaning=lm.meaning, batch=False,
                 estimate=True, verify=4)
    assert _close(one.estimates, mine.estimates) and one.baseline == mine.baseline
    assert np.array_equal(one.values, mine.values, equal_nan=True)
    assert one.verified["cells"] == mine.verified["cells"] and len(one.verified["cells"]) == 4
    assert one.verified["values"] == mine.verified["values"]
    assert one.forwards["gradient"] == 1

    prompts.write_text(PROMPTS + "x" * 80 + "\n")  # demo:lm reads at most 64 characters
    with pytest.raises(InputError, match=r"input 5 \(xxxx.*cannot take it.*at most 64"):
        lm_pool.sweep_inputs(open_inputs(prompts), over, iv, "logit:e")
    prompts.write_text(PROMPTS)
    s = Session.load("demo:lm", input_text=PROMPT)
    try:
        kw = dict(inputs=str(prompts), estimate=True, verify=2)
        assert_same_set_sweep(s.sweep(over, iv, "logit:e", pool=lm_pool, **kw),
                              s.sweep(over, iv, "logit:e", **kw), exact=False)
    finally:
        assert s.close()


def test_cli_sweep_inputs_estimated_on_ray_prints_the_local_json(ray_local, tmp_path):
    """hookscope sweep --inputs --estimate --verify over two Ray workers: the local JSON."""
    from hookscope.app.sweep_cli import sweep_command

    prompts = tmp_path / "prompts.txt"
    prompts.write_text(PROMPTS)
    argv = ["demo:lm", "--inputs", str(prompts), "--over", "layer=blocks.0.attn,blocks.0.mlp",
            "--over", "f=0,0.3,0.6,1.2,2.5", "--intervene", "{layer}=scale:{f}", "--metric",
            "logit:e", "--estimate", "--verify", "3", "--json", "--batch", "1"]
    outs = []
    for extra in ([], ["--ray", "local", "--ray-workers", "2"]):
        out, err = io.StringIO(), io.StringIO()
        assert sweep_command(argv + extra, out, err) == 0
        d = json.loads(out.getvalue())
        d.pop("timings_ms")
        d.pop("forwards")   # each worker counts its own
        outs.append((d, err.getvalue()))
    (local, _), (remote, note) = outs
    # the estimates: a backward in a worker, to float rounding; the rest bit for bit (--batch 1)
    assert _close(remote.pop("estimates"), local.pop("estimates"))
    ver, mine = remote.pop("verified"), local.pop("verified")
    assert ver["cells"] == mine["cells"] and ver["values"] == mine["values"]
    assert _close(ver["estimates"], mine["estimates"]) and len(mine["cells"]) == 3
    assert remote == local and len(local["per_input"]) == 5
    assert "estimating 10 cells" in note and "in shards of inputs" in note


def test_cli_sweep_on_ray_prints_the_local_json(ray_local, tmp_path):
    from hookscope.app.sweep_cli import sweep_command

    argv = ["demo:lm", "--input", PROMPT, "--over", "layer=blocks.*", "--over", "pos=14:19",
            "--intervene", "{layer}=patch@pos={pos}", "--source-input", SOURCE,
            "--metric", "kl", "--json", "--batch", "1"]   # every cell its own forward: bit for bit
    outs = []
    for extra in ([], ["--ray", "local", "--ray-workers", "2", "--csv", str(tmp_path / "g.csv")]):
        out, err = io.StringIO(), io.StringIO()
        assert sweep_command(argv + extra, out, err) == 0
        d = json.loads(out.getvalue())
        outs.append((d, err.getvalue()))
    (local, _), (remote, note) = outs
    for d in (local, remote):
        d.pop("timings_ms")
        d.pop("forwards")
        assert d.pop("batched")["cells"] == 0
    assert remote == local
    assert "over 2 Ray workers" in note
    csv_rows = (tmp_path / "g.csv").read_text().splitlines()
    assert len(csv_rows) == 1 + 2 * 5


def test_a_file_named_by_data_runs_only_with_the_persons_yes_for_it(ray_local, tmp_path):
    """A spec read from a session file is data: its factory runs in the workers only under
    a CodeTrust naming that file and hash (checked before any worker starts)."""
    from hookscope.core.model.code_trust import CodeTrust, CodeTrustError, code_to_run

    (tmp_path / "factory.py").write_text(
        "import torch\n\ndef small():\n    torch.manual_seed(5)\n"
        "    return torch.nn.Linear(3, 2), torch.ones(1, 3)\n")
    spec = f"{tmp_path / 'factory.py'}:small"
    with pytest.raises(CodeTrustError, match="nothing was run"):
        RayPool("local", PoolModel(spec, trust=CodeTrust.from_data()), 1, num_cpus=0)
    trust = CodeTrust.from_data().granting(code_to_run(spec))
    with RayPool("local", PoolModel(spec, trust=trust), 1, num_cpus=0) as pool:
        got = pool.map(tasks().output_sum, [0, 1])
    local = load_model(spec)
    assert got == [tasks().output_sum(local, s) for s in (0, 1)]


def test_cli_scan_on_ray_prints_the_local_json(ray_local):
    """hookscope scan --ray: the digits' shards over two workers give the local numbers."""
    from pathlib import Path

    from hookscope.app.scan_cli import scan_command

    digits = Path(__file__).resolve().parents[2] / "resources" / "digits_test.safetensors"
    # one input a batch (a budget of one byte), so both sides see bit-identical activations
    argv = ["demo:cnn", "--inputs", str(digits), "--capture", "conv2", "--intervene",
            "conv2=zero@units=3", "--unit", "conv2:3", "--limit", "40", "--budget", "1", "--json"]
    outs = []
    for extra in ([], ["--ray", "local", "--ray-workers", "2"]):
        out, err = io.StringIO(), io.StringIO()
        assert scan_command(argv + extra, out, err) == 0
        d = json.loads(out.getvalue())
        d.pop("seconds", None)
        d.pop("forwards", None)   # each worker counts its own
        outs.append((d, err.getvalue()))
    (local, _), (remote, note) = outs
    assert remote == local
    assert local["count"] == 40 and "over 2 Ray workers" in note
