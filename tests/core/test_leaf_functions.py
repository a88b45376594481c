"""Each intervention kind's arithmetic is written once: the exported script's copy is the
source of the function the kind applies, and running that copy gives the kind's numbers."""

from __future__ import annotations

import functools
import inspect
import math

import pytest
import torch
from torch import nn

from hookscope.core import Clamp, MeanAblate, Noise, Patch, Scale, Zero, kinds, get_kind
from hookscope.core.plan.intervention_base import InterventionContext


def script_namespace(kind) -> dict:
    """The kind's definitions as the exported script holds them, executed with torch alone."""
    ns = {"torch": torch, "nn": nn, "math": math, "functools": functools}
    exec("from __future__ import annotations\n\n" + "\n\n".join(kind.leaf_definitions()), ns)
    return ns


def test_every_kind_with_a_plain_torch_form_exports_the_function_it_applies():
    exported = [get_kind(name) for name in kinds() if get_kind(name).leaf_function is not None]
    assert {k.name for k in exported} >= {"clamp", "scale", "zero", "mean", "noise", "patch"}
    for kind in exported:
        fn = kind.leaf_function
        assert callable(fn) and kind.leaf_definitions()[-1] == inspect.getsource(fn).strip("\n")
        # the modules of plain-torch functions the exported script copies (torch only there)
        assert fn.__module__ in ("hookscope.core.plan.leaf_functions",
                                 "hookscope.core.plan.sae_leaf"), fn.__module__


@pytest.mark.parametrize("iv", [Clamp(-0.3, 0.4), Clamp(None, 0.5), Scale(-1.5), Zero(),
                                Zero((1, -1)), Zero((0,), dim=0), Noise(0.2, seed=3), MeanAblate()],
                         ids=repr)
@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
def test_the_scripts_copy_gives_the_kinds_numbers(iv, dtype):
    conv = nn.Conv2d(3, 3, 1)
    t = (torch.randn(2, 3, 4, 5, generator=torch.Generator().manual_seed(0)) * 3).to(dtype)
    ns = script_namespace(type(iv))
    fn = eval(iv.to_torch_source(), ns)
    want = iv.apply(t, InterventionContext(path="conv", module=conv))
    got = fn(t, conv, None)
    assert got.dtype == want.dtype and torch.equal(got, want)


def test_a_patch_and_a_reference_mean_read_the_source_leaf_the_same_way():
    t = torch.randn(2, 6, generator=torch.Generator().manual_seed(1))
    src = torch.randn(2, 6, generator=torch.Generator().manual_seed(2))
    for iv in (Patch("[[0.0]]"), MeanAblate("[[0.0]]")):
        fn = eval(iv.to_torch_source(), script_namespace(type(iv)))
        want = iv.apply_tensor(t, InterventionContext(path="lin", source_leaf=src))
        assert torch.equal(fn(t, None, src), want)
