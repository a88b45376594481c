"""Hand-written hooks the core tests compare Hookscope's captures against."""

from __future__ import annotations

import torch


def clone_reference(model, x, paths):
    """``{path: output}`` of one no-grad forward, each output cloned by a plain
    forward hook the moment its layer returns (right even under later in-place ops)."""
    got = {}
    mods = dict(model.named_modules())
    hs = [mods[p].register_forward_hook(
        (lambda p: lambda m, i, o: got.__setitem__(p, o.detach().clone()))(p)) for p in paths]
    with torch.no_grad():
        model(x)
    for h in hs:
        h.remove()
    return got
