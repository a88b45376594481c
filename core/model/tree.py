"""The module tree as plain data, for views and scripts.

:func:`module_tree` walks ``named_modules`` once. A module reachable by two
paths appears once, under its first path, and lists its other paths in
``aliases``; the second place is still shown in the tree as a node with
``alias_of`` set, so a person sees the sharing instead of a silently missing
branch. :func:`observe` fills in what only a forward reveals: each module's
output shape and how many times it ran.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterator

from torch import nn

from .dispatch import layer_devices
from ..base.nested import tensor_leaves


@dataclass
class TreeNode:
    """One module in the tree.

    ``path`` is what plans use (``""`` is the root). ``params`` counts the
    module's own parameters and those below it, each shared parameter once.
    ``alias_of`` is set on the second and later places of a shared module.
    ``output_shape``/``calls`` are filled by :func:`observe`. ``device`` is
    where the layer lives (``'cuda:0'``, ``'cpu'``, ``'disk'`` for weights
    offloaded by accelerate; several, comma-separated, for a module spread out).
    """

    path: str
    name: str
    type_name: str
    params: int
    children: list["TreeNode"] = field(default_factory=list)
    aliases: list[str] = field(default_factory=list)
    alias_of: str | None = None
    output_shape: tuple[int, ...] | None = None
    calls: int = 0
    device: str | None = None

    @property
    def is_leaf(self) -> bool:
        return not self.children

    def walk(self) -> Iterator["TreeNode"]:
        """This node and every node below it, depth first, in model order."""
        yield self
        for c in self.children:
            yield from c.walk()

    def find(self, path: str) -> "TreeNode | None":
        return next((n for n in self.walk() if n.path == path), None)

    def take_observed(self, observed: "TreeNode") -> None:
        """The output shapes and call counts an observing pass found (``observed``, a tree
        of the same model), onto this tree's nodes of the same paths."""
        by_path = {n.path: n for n in observed.walk()}
        for node in self.walk():
            o = by_path.get(node.path)
            if o is not None:
                node.output_shape, node.calls = o.output_shape, o.calls

    def blocks_pattern(self) -> str | None:
        """The model's repeated blocks as a layer pattern (``blocks.*``, ``transformer.h.*``):
        the ``ModuleList`` with the most children; ``None`` when there is none."""
        lists = [n for n in self.walk() if n.path and n.type_name == "ModuleList" and n.children]
        best = max(lists, key=lambda n: len(n.children), default=None)
        return f"{best.path}.*" if best is not None else None

    def to_dict(self) -> dict:
        return {"path": self.path, "type": self.type_name, "params": self.params,
                "aliases": self.aliases, "alias_of": self.alias_of,
                "output_shape": list(self.output_shape) if self.output_shape else None,
                "calls": self.calls, "device": self.device, "children": [c.to_dict() for c in self.children]}


def _param_count(m: nn.Module) -> int:
    seen: set[int] = set()
    n = 0
    for p in m.parameters():
        if id(p) not in seen:
            seen.add(id(p))
            n += p.numel()
    return n


def module_tree(module: nn.Module) -> TreeNode:
    """The tree of ``module`` as :class:`TreeNode` objects (root path ``""``)."""
    first_path: dict[int, str] = {}
    root = TreeNode("", "", type(module).__name__, _param_count(module))
    first_path[id(module)] = ""
    nodes = {"": root}

    def build(node: TreeNode, mod: nn.Module) -> None:
        for name, child in mod.named_children():
            if child is None:
                continue
            path = f"{node.path}.{name}" if node.path else name
            if id(child) in first_path:
                # A second way to the same module: show it, but do not descend again.
                orig = first_path[id(child)]
                nodes[orig].aliases.append(path)
                node.children.append(TreeNode(path, name, type(child).__name__, 0, alias_of=orig))
                continue
            first_path[id(child)] = path
            cn = TreeNode(path, name, type(child).__name__, _param_count(child))
            nodes[path] = cn
            node.children.append(cn)
            build(cn, child)

    build(root, module)
    devices = layer_devices(module)
    for n in root.walk():
        n.device = devices.get(n.alias_of or n.path)
    return root


