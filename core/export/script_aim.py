"""``at=`` in the exported script: :func:`hookscope.core.plan.aim.aimed` in plain torch.

:data:`AIM_HELPERS` is written into the script when some intervention has an
``at``; it repeats, with torch alone, how :mod:`hookscope.core.plan.aim` picks
positions, heads and units, narrows a source tensor the same way on its own
lengths, and writes the changed part back into a copy. Heads are acted on at
the output projection's input: the script registers a forward pre-hook there
(``HEAD_SITES``: layer -> (projection path, number of heads)). The feature axis
is the kinds' own :func:`~hookscope.core.plan.leaf_functions.feature_dim`, copied
into the script before these helpers (:data:`AIM_NEEDS`).
"""

from __future__ import annotations

from typing import Any, Callable

from ..plan.leaf_functions import feature_dim
from ..base.errors import HookscopeError

#: The plain-torch functions :data:`AIM_HELPERS` calls, copied into the script before it.
AIM_NEEDS: tuple[Callable[..., Any], ...] = (feature_dim,)

AIM_HELPERS = '''
def sequence_axis(t, module):
    """The token axis of a (batch, seq, features) tensor, else None."""
    if t.dim() != 3:
        return None
    if isinstance(module, nn.MultiheadAttention) and not module.batch_first:
        return 0
    return 1 if feature_dim(t, module) == 2 else None


def picked(sel, n):
    """Sorted indices a selector (ints and (start, stop) ranges) picks on an axis of length n."""
    out = set()
    for item in sel:
        if isinstance(item, tuple):
            out.update(range(n)[slice(*item)])
        else:
            out.add(item % n)
    return sorted(out)


def aimed(change, positions=None, heads=None, units=None, n_heads=None):
    """change applied to the part of each tensor that positions/heads/units pick, written back
    into a copy; tensors without those axes pass through. n_heads: the layer's heads."""
    def split(t, module, n_heads):
        x, dims = t, []
        if positions is not None:
            seq = sequence_axis(t, module)
            dims.append((seq, picked(positions, t.shape[seq])))
        if heads is not None:
            x = t.unflatten(-1, (n_heads, t.shape[-1] // n_heads))
            dims.append((x.dim() - 2, picked(heads, n_heads)))
            unit_axis = x.dim() - 1
        else:
            unit_axis = feature_dim(t, module)
        if units is not None:
            dims.append((unit_axis, picked(units, x.shape[unit_axis])))
        parts = [x]
        for axis, idx in dims:
            parts.append(parts[-1].index_select(axis, torch.tensor(idx, device=x.device)))
        return dims, parts

    def one(t, module, source):
        if positions is not None and sequence_axis(t, module) is None:
            return t
        if heads is not None and (n_heads is None or t.shape[-1] % n_heads):
            return t
        dims, parts = split(t, module, n_heads)
        src = None if source is None else split(source, module, n_heads)[1][-1]
        new = change(parts[-1], module, src)
        for (axis, idx), base in zip(reversed(dims), reversed(parts[:-1])):
            out = base.clone()
            out.index_copy_(axis, torch.tensor(idx, device=base.device), new.to(out.dtype))
            new = out
        return new.reshape(t.shape)
    return one

'''


def head_sites(module: Any, plan: Any) -> dict[str, tuple[str, int]]:
    """``{layer: (projection path, number of heads)}`` for the plan's head targets on ``module``
    (a layer acted on at its own output has none)."""
    if module is None or not any(iv.where() is not None and iv.where().heads is not None
                                 for iv in plan.all_interventions().values()):
        return {}
    out: dict[str, tuple[str, int]] = {}
    names = {id(m): p for p, m in module.named_modules()}
    for path, lp in plan.resolve(module).items():
        site = lp.head_site
        if site is not None and site.recompute:
            raise HookscopeError(f"the script export cannot write heads of layer {path!r}: an "
                                 "nn.MultiheadAttention's heads are computed again by Hookscope "
                                 "(core/plan/heads_mha.py), which the plain-torch script does not repeat; "
                                 "act on its whole output or export another layer")
        if site is not None and site.projection is not None:
            out[path] = (names[id(site.projection)], site.n_heads)
    return out
