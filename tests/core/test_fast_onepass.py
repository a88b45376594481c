"""The compiled one-pass summary gives the numbers the torch path gives.

``core/fast/_onepass.c`` reads a float32 tensor once for min, max, sum, sum of
squares and the histogram sample (and, for statistics-only hooks, bins it).
Each test here runs the same tensor through both paths, or against a float64
reference, so a wrong lane, a lost tail, a thread's slice that overlaps or
misses values, or a bin off by one shows up.
"""

import math
import os
import platform
import shutil
import subprocess
import sys

import numpy as np
import pytest
import torch
from hypothesis import example, given, settings
from hypothesis import strategies as st

from hookscope.core import Plan, run
from hookscope.core.fast import onepass
from hookscope.core.engine import stats as S
from hookscope.core.views.hist_sample import HIST_SAMPLE, SAMPLE_RUN, hist_sample, sample_runs
from hookscope.core.engine.stats import summarize
from hookscope.core.fast.stats_plain import summarize_plain

from fast_marks import fast_only  # tests/core is on sys.path

pytestmark = fast_only

needs_kernel = pytest.mark.skipif(onepass.KERNEL is None, reason=f"the kernel is off: {onepass.which()}")

# Lengths around the loop's edges: one value, under one 32-value step, one 256-value
# block, the sample size, a thread's minimum slice (2^16) and two of them, odd tails.
LENGTHS = [1, 7, 31, 33, 255, 257, 1000, HIST_SAMPLE, HIST_SAMPLE + 1, (1 << 17) - 3,
           (1 << 17) + 255, 802_816, (1 << 22) + 13]


def test_the_install_built_the_kernel_where_it_can():
    # CI and `make install` have a C compiler: the statistics must not silently fall
    # back to the slower torch path there.
    if shutil.which("cc") is None or platform.machine() not in ("x86_64", "AMD64"):
        pytest.skip("no C compiler or not x86-64: the torch path is the designed fallback")
    assert onepass._ext is not None, "core/fast/_onepass.c was not built by the install"
    if onepass._ext.uses_simd() and os.environ.get("HOOKSCOPE_NO_ONEPASS", "") in ("", "0"):
        assert onepass.KERNEL is not None
        assert onepass.which().startswith("one-pass kernel")
    else:  # built but switched off: which() says why
        assert onepass.KERNEL is None and not onepass.which().startswith("one-pass kernel")


def _torch_path(x: torch.Tensor, monkeypatch) -> S.TensorStats:
    with monkeypatch.context() as m:
        m.setattr(onepass, "KERNEL", None)
        return summarize(x).resolve()


def _assert_same(got: S.TensorStats, want: S.TensorStats, ref: torch.Tensor) -> None:
    finite = ref[torch.isfinite(ref)].double()
    assert (got.count, got.nan_count, got.inf_count) == (want.count, want.nan_count, want.inf_count)
    assert (got.min, got.max) == (want.min, want.max) == (float(finite.min()), float(finite.max()))
    spread = float(finite.std(correction=0))
    # float32 data: its own rounding is ~6e-8 of the spread; a lost or doubled value is far more
    assert got.mean == pytest.approx(float(finite.mean()), rel=1e-7, abs=1e-7 * spread)
    assert got.std == pytest.approx(spread, rel=1e-6)
    np.testing.assert_array_equal(got.hist_edges, want.hist_edges)
    np.testing.assert_array_equal(got.hist_counts, want.hist_counts)


@needs_kernel
@pytest.mark.parametrize("n", LENGTHS)
def test_kernel_equals_the_torch_path(n, monkeypatch):
    g = torch.Generator().manual_seed(n)
    x = torch.randn(n, generator=g) * 2.5 + 0.75
    if n > 2:
        x[n // 3] = -40.0  # the min and max sit in the middle, not in the first lanes
        x[n - 1] = 55.0  # and in the tail the vector loop leaves to the scalar one
    _assert_same(summarize(x).resolve(), _torch_path(x, monkeypatch), x)


@needs_kernel
@pytest.mark.parametrize("n", [5, 257, HIST_SAMPLE + 3, 802_816])
def test_hook_path_bins_in_the_kernel_like_the_torch_path(n, monkeypatch):
    # summarize_plain bins the sample inside the kernel; summarize bins it in NumPy.
    original = torch.relu(torch.randn(1, n, generator=torch.Generator().manual_seed(7)))
    x = original.clone()
    pending = summarize_plain(x)
    assert pending is not None
    x.fill_(123.0)  # the layer's output overwritten after the hook: nothing may depend on it
    got = pending.resolve()
    assert got.shape == (1, n) and got.dtype == "float32"
    assert int(got.hist_counts.sum()) == min(n, HIST_SAMPLE)
    _assert_same(got, _torch_path(original, monkeypatch), original)


@needs_kernel
@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf"), 1e20])
def test_non_finite_values_and_overflowing_squares_take_the_exact_path(bad, monkeypatch):
    # 1e20 is finite, but its square overflows float32: the sums say so and the torch
    # path (which handles it) takes over.
    x = torch.randn(50_000, generator=torch.Generator().manual_seed(3))
    x[12_345] = bad
    assert summarize_plain(x) is None
    got = summarize(x).resolve()
    _assert_same(got, _torch_path(x, monkeypatch), x)
    assert got.nan_count == (1 if bad != bad else 0)
    assert got.inf_count == (1 if math.isinf(bad) else 0)


@needs_kernel
@pytest.mark.parametrize("values", [torch.full((1000,), 3.5), torch.full((40_000,), 1e4) + torch.arange(40_000) * 1e-3])
def test_constant_or_nearly_constant_data_is_left_to_the_exact_variance(values, monkeypatch):
    # E[x^2] - E[x]^2 cancels when |mean| >> std: the hook path refuses, summarize
    # takes the two-pass variance.
    assert summarize_plain(values) is None
    _assert_same(summarize(values).resolve(), _torch_path(values, monkeypatch), values)


@needs_kernel
@pytest.mark.parametrize("n", [100, HIST_SAMPLE + 5, 1 << 20])
def test_kernel_sample_is_the_torch_paths_sample(n):
    x = torch.randn(n, generator=torch.Generator().manual_seed(n))
    runs, step = sample_runs(n) if n > HIST_SAMPLE else (0, 0)
    _, sample = onepass.summary_f32(x, runs, step, SAMPLE_RUN)
    np.testing.assert_array_equal(sample, hist_sample(x).numpy())


@needs_kernel
def test_every_thread_count_gives_the_same_numbers():
    x = torch.randn((1 << 20) + 77, generator=torch.Generator().manual_seed(11))
    got = [onepass.KERNEL.summary_f32(x.data_ptr(), x.numel(), t, 0, 0, 0, 0)[:4] for t in (1, 2, 3, 8)]
    assert {g[:2] for g in got} == {(float(x.min()), float(x.max()))}
    ref = x.double()
    scale = math.sqrt(x.numel())  # the sum's own spread: float32 rounding is ~1e-7 of it
    for _, _, total, sumsq in got:
        assert total == pytest.approx(float(ref.sum()), abs=1e-7 * scale)
        assert sumsq == pytest.approx(float((ref * ref).sum()), rel=1e-7)


@needs_kernel
def test_kernel_refuses_sample_runs_outside_the_data():
    x = torch.zeros(100)
    with pytest.raises(ValueError, match="outside the data"):
        onepass.KERNEL.summary_f32(x.data_ptr(), 100, 1, 10, 10, 16, 0)  # the last run ends at 106


@needs_kernel
@pytest.mark.parametrize("make", [lambda x: x.t(), lambda x: x.double(), lambda x: x.half()],
                         ids=["strided", "float64", "float16"])
def test_other_layouts_and_dtypes_leave_the_hook_path_and_still_agree(make, monkeypatch):
    # The hook path reads the tensor's own memory, so it takes contiguous float32 only;
    # summarize gets the others (a strided or float16 one through its float32 copy).
    x = make(torch.randn(300, 200, generator=torch.Generator().manual_seed(2)))
    assert summarize_plain(x) is None
    got = summarize(x).resolve()
    want = _torch_path(x, monkeypatch)
    assert (got.min, got.max) == (want.min, want.max)
    assert got.mean == pytest.approx(want.mean, rel=1e-6) and got.std == pytest.approx(want.std, rel=1e-6)
    np.testing.assert_array_equal(got.hist_counts, want.hist_counts)


@needs_kernel
def test_statistics_only_run_records_every_layer_on_the_kernel(monkeypatch):
    # A model with an in-place ReLU after a layer and a layer that outputs a NaN: the
    # hook path summarises the values as the layer returned them, and the NaN layer is
    # counted exactly by the torch path.
    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = torch.nn.Linear(16, 4096)
            self.act = torch.nn.ReLU(inplace=True)
            self.log = torch.nn.Identity()

        def forward(self, x):
            h = self.act(self.fc(x))
            return self.log(torch.log(h - 0.5))  # NaN where h < 0.5

    torch.manual_seed(0)
    m, x = Net().eval(), torch.randn(8, 16)
    with torch.inference_mode():
        pre = m.fc(x)
    r = run(m, x, Plan(capture=["fc", "act", "log"], keep_tensors=False))
    fc = r.captures["fc"][0].stats
    assert fc.min == float(pre.min()) < 0  # before the in-place ReLU overwrote it
    log = r.captures["log"][0].stats
    with torch.inference_mode():
        want_nan = int(torch.isnan(torch.log(torch.relu(pre) - 0.5)).sum())
    assert log.nan_count == want_nan > 0
    with monkeypatch.context() as mp:
        mp.setattr(onepass, "KERNEL", None)
        slow = run(m, x, Plan(capture=["fc", "act", "log"], keep_tensors=False))
    for path in ("fc", "act", "log"):
        a, b = r.captures[path][0].stats, slow.captures[path][0].stats
        assert (a.min, a.max, a.nan_count) == (b.min, b.max, b.nan_count)
        assert a.mean == pytest.approx(b.mean, rel=1e-6) and a.std == pytest.approx(b.std, rel=1e-5)
        np.testing.assert_array_equal(a.hist_counts, b.hist_counts)


@needs_kernel
def test_nested_output_leaves_are_binned_in_the_forward_too(monkeypatch):
    # An LSTM leaf returns (out, (h, c)): three leaves, each with its own range, so
    # statistics only bins each contiguous one in the kernel and keeps no sample of it
    # (batch_first's output is a transposed view: the torch path takes it).
    torch.manual_seed(0)
    m, x = torch.nn.Sequential(torch.nn.LSTM(8, 32, batch_first=True)).eval(), torch.randn(4, 600, 8)
    r = run(m, x, Plan(capture=["0"], keep_tensors=False))
    rec = r.captures["0"][0]
    assert [lf.leaf for lf in rec.leaves] == ["[0]", "[1][0]", "[1][1]"]
    kinds = [type(lf._stats.vector).__name__ for lf in rec.leaves]
    assert kinds == ["Unbinned", "_KernelBinned", "_KernelBinned"]
    assert rec.leaves[0]._stats.vector.sample.size > 0  # the view's sample, binned on read
    with monkeypatch.context() as mp:
        mp.setattr(onepass, "KERNEL", None)
        slow = run(m, x, Plan(capture=["0"], keep_tensors=False)).captures["0"][0]
    for a, b in zip((lf.stats for lf in rec.leaves), (lf.stats for lf in slow.leaves)):
        assert (a.shape, a.min, a.max) == (b.shape, b.min, b.max)
        assert a.mean == pytest.approx(b.mean, rel=1e-6) and a.std == pytest.approx(b.std, rel=1e-5)
        np.testing.assert_array_equal(a.hist_counts, b.hist_counts)


@needs_kernel
@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(width=32, min_value=-2.0**60, max_value=2.0**60)
                | st.floats(width=32), min_size=1, max_size=700))
@example([3.1658669942767616e16, 3.0994154750214144e16, 3.0994154750214144e16])  # std was 1e-3 off
def test_any_float32_data_summarises_like_the_torch_path(values):
    x = torch.tensor(values, dtype=torch.float32)
    got = summarize(x).resolve()
    saved = onepass.KERNEL
    onepass.KERNEL = None  # hypothesis runs many examples per test: no monkeypatch fixture
    try:
        want = summarize(x).resolve()
    finally:
        onepass.KERNEL = saved
    assert (got.nan_count, got.inf_count) == (want.nan_count, want.inf_count)
    for a, b in ((got.min, want.min), (got.max, want.max)):
        assert a == b or (math.isnan(a) and math.isnan(b))
    for a, b in ((got.mean, want.mean), (got.std, want.std)):
        assert (math.isnan(a) and math.isnan(b)) or a == pytest.approx(b, rel=1e-5, abs=1e-30 + 1e-6 * abs(want.std))
    np.testing.assert_array_equal(got.hist_counts, want.hist_counts)


def test_the_environment_switch_turns_the_kernel_off():
    code = "from hookscope.core.fast import onepass; print(onepass.KERNEL is None, onepass.which())"
    env = {**os.environ, "HOOKSCOPE_NO_ONEPASS": "1"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.startswith("True torch reductions")
