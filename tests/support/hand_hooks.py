"""Hand-written hooks the tests compare Hookscope's captures against."""

from __future__ import annotations

import torch


def hooked_outputs(module, x, paths, clamp=None):
    """``{path: output}`` of one no-grad forward of ``module``, each output cloned by a plain
    forward hook the moment its layer returns (right even under later in-place ops);
    ``clamp``: ``(path, lo, hi)``, that layer's output clamped by a hook first. Every hook
    is removed, errors included."""
    got, handles = {}, []
    if clamp is not None:
        path, lo, hi = clamp
        handles.append(module.get_submodule(path).register_forward_hook(
            lambda _m, _a, out: out.clamp(lo, hi)))
    for p in paths:
        handles.append(module.get_submodule(p).register_forward_hook(
            lambda _m, _a, out, p=p: got.__setitem__(p, out.detach().clone())))
    try:
        with torch.no_grad():
            module(x)
    finally:
        for h in handles:
            h.remove()
    return got
