"""The compiled pair comparison gives the numbers the torch path of the model diff gives.

``core/fast/_onepass.c``'s ``pair_sums`` reads two float32/bfloat16 tensors once for the
largest ``|a - b|`` and the sums of ``(a - b)²``, ``a²``, ``b²`` and ``a·b`` (the model
diff's per-layer comparison, :class:`~hookscope.core.analyses.model_diff_result.PairSums`).
Each test checks it against a float64 reference or against the diff's torch path, so a
wrong lane, a lost tail, a bfloat16 widened wrongly or a thread's slice that overlaps or
misses values shows up.
"""

import copy
import math

import pytest
import torch

from hookscope.core import diff, load_model
from hookscope.core.analyses.model_diff_result import PairSums
from hookscope.core.fast import onepass

from fast_marks import fast_only  # tests/core is on sys.path

pytestmark = [fast_only, pytest.mark.skipif(onepass.KERNEL is None,
                                            reason=f"the kernel is off: {onepass.which()}")]

# Lengths around the loop's edges: one value, under one 16-value step, one 256-value
# block and either side, a thread's minimum slice (2^13, PAIR_PAR_MIN) and two and three of
# them, the statistics kernel's (2^16) and two of them, odd tails.
LENGTHS = [1, 7, 15, 17, 255, 256, 257, 1000, (1 << 14) - 3, (1 << 14) + 255, 3 * (1 << 13) + 1,
           25_088, (1 << 17) - 3, (1 << 17) + 255, 802_816 + 5]
DTYPES = [(torch.float32, torch.float32), (torch.float32, torch.bfloat16),
          (torch.bfloat16, torch.float32), (torch.bfloat16, torch.bfloat16)]


def _pair(n: int, da: torch.dtype, db: torch.dtype, seed: int = 0):
    g = torch.Generator().manual_seed(seed + n)
    a = torch.randn(n, generator=g) * 3 + 0.5
    b = a + 0.05 * torch.randn(n, generator=g)
    if n > 2:
        b[n // 3] += 7.0  # the largest difference in the middle, not in the first lanes
        b[n - 1] -= 9.0  # and in the tail the vector loop leaves to the scalar one
    return a.to(da), b.to(db)


def _reference(a: torch.Tensor, b: torch.Tensor) -> tuple[float, float, float, float, float]:
    fa, fb = a.float(), b.float()  # both widened exactly, the difference in float32
    worst = float((fb - fa).abs().max())
    a64, b64 = fa.double(), fb.double()
    d64 = (fb - fa).double()
    return (worst, float((d64 * d64).sum()), float((a64 * a64).sum()), float((b64 * b64).sum()),
            float((a64 * b64).sum()))


@pytest.mark.parametrize("da,db", DTYPES, ids=lambda d: str(d).removeprefix("torch."))
@pytest.mark.parametrize("n", LENGTHS)
def test_kernel_equals_a_float64_reference(n, da, db):
    a, b = _pair(n, da, db)
    got = onepass.pair_sums(a, b)
    want = _reference(a, b)
    assert got is not None
    assert got[0] == want[0]  # the float32 difference's largest magnitude, exactly
    for g, w in zip(got[1:], want[1:]):
        # float32 partial sums over 256-value blocks: ~1e-7 relative, a lost or doubled
        # value (or a wrongly widened bfloat16) is far more
        assert g == pytest.approx(w, rel=2e-6)


@pytest.mark.parametrize("n", [(1 << 14) + 77, 3 * (1 << 13) + 77, (1 << 20) + 77])
def test_every_thread_count_gives_the_same_numbers(n):
    a, b = _pair(n, torch.float32, torch.bfloat16, seed=5)
    want = _reference(a, b)
    for t in (1, 2, 3, 8):
        got = onepass.KERNEL.pair_sums(a.data_ptr(), False, b.data_ptr(), True, a.numel(), t)
        assert got[0] == want[0]
        for g, w in zip(got[1:], want[1:]):
            assert g == pytest.approx(w, rel=2e-6)


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), 1e20])
def test_non_finite_sums_leave_it_to_the_torch_path(bad):
    # 1e20 is finite, but its square overflows float32: the sums say so
    a, b = _pair(50_000, torch.float32, torch.float32)
    b[12_345] = bad
    assert onepass.pair_sums(a, b) is None


@pytest.mark.parametrize("make", [lambda t: t.reshape(300, 200).t(), lambda t: t.double(),
                                  lambda t: t.half()], ids=["strided", "float64", "float16"])
def test_other_layouts_and_dtypes_are_declined(make):
    a, b = _pair(60_000, torch.float32, torch.float32)
    assert onepass.pair_sums(make(a), make(b)) is None
    assert onepass.pair_sums(a, make(b)) is None


def _rows_on_the_torch_path(monkeypatch, *args, **kwargs):
    with monkeypatch.context() as m:
        m.setattr(onepass, "KERNEL", None)
        assert onepass.pair_sums(*_pair(10, torch.float32, torch.float32)) is None
        return diff(*args, **kwargs).layers


@pytest.mark.parametrize("dtype", ["bfloat16", None])
def test_the_diff_reads_the_same_rows_through_the_kernel(dtype, monkeypatch, tmp_path):
    lm = load_model("demo:cnn")
    b = copy.deepcopy(lm.module)
    with torch.no_grad():
        b.conv2.weight.add_(0.01 * torch.randn(b.conv2.weight.shape,
                                               generator=torch.Generator().manual_seed(1)))
    calls = []
    real = onepass.pair_sums
    monkeypatch.setattr(onepass, "pair_sums", lambda a_, b_: calls.append(1) or real(a_, b_))
    got = diff(lm, b, dtype=dtype).layers
    assert len(calls) == len(got) + 1  # every row and the two outputs were read by the kernel
    want = _rows_on_the_torch_path(monkeypatch, lm, b, dtype=dtype)
    assert [(r.path, r.call) for r in got] == [(r.path, r.call) for r in want]
    for g, w in zip(got, want):
        assert g.max_abs_diff == w.max_abs_diff
        assert g.relative_change == pytest.approx(w.relative_change, rel=1e-5, abs=1e-12)
        assert g.cosine == pytest.approx(w.cosine, abs=1e-6)


def test_a_row_with_a_nan_goes_to_the_torch_path():
    # NaN beside NaN counts as equal there; the kernel's sums are not finite, so it declines
    a = torch.randn(1000, generator=torch.Generator().manual_seed(2))
    b = a + 0.5
    a[3] = b[3] = float("nan")
    sums = PairSums()
    sums.add(a, b)
    row = sums.row("x", 0)
    assert row.max_abs_diff == pytest.approx(0.5, rel=1e-6)
    want = float((b.double() - a.double()).nan_to_num().norm() / a.double().nan_to_num().norm())
    assert row.relative_change == pytest.approx(want, rel=1e-5)
    assert math.isfinite(row.cosine)
