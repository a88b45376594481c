"""Observing a model: one forward with a light hook on every module.

Records each module's output shape and call count on the module tree, so the
views can show shapes before anything is captured.
"""

from __future__ import annotations

from typing import Any

from torch import nn

from ..engine.forward_state import forward, restore, snapshot
from ..base.nested import tensor_leaves
from ..model.learned import memory_for
from ..model.tree import TreeNode, module_tree


def observe(module: nn.Module, inputs: Any, tree: TreeNode | None = None) -> TreeNode:
    """Run one forward with a light hook on every module and record each
    module's output shape (first tensor leaf, first call) and call count.

    The forward runs on whatever device the module and inputs already are;
    hooks are removed before returning, also when the forward raises.
    """
    tree = tree or module_tree(module)
    start = snapshot(module)  # looking leaves no trace: RNG and buffers as they were
    seen: dict[int, list] = {}
    handles = []

    def make(key: int):
        def hook(_m, _a, out):
            rec = seen.setdefault(key, [None, 0])
            if rec[0] is None:
                leaves = tensor_leaves(out)
                rec[0] = tuple(leaves[0][1].shape) if leaves else ()
            rec[1] += 1
        return hook

    try:
        for _, m in module.named_modules():
            handles.append(m.register_forward_hook(make(id(m))))
        forward(module, inputs)
    finally:
        for h in handles:
            h.remove()
        restore(module, start)
    memory_for(module).first_forward_on(inputs)  # a warm-up too: the next run's time is its own
    by_path = dict(module.named_modules(remove_duplicate=False))
    for node in tree.walk():
        target = by_path.get(node.alias_of or node.path)
        rec = seen.get(id(target)) if target is not None else None
        node.output_shape, node.calls = (rec[0], rec[1]) if rec else (None, 0)
    return tree
