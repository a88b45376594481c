"""The layer tree's "Sweep over these layers" entries: from the row a person right-clicked,
the layers a sweep would most likely run over — the same place in every repeated block
(``blocks.0.mlp`` -> ``blocks.*.mlp``), every layer of the same type (``conv1, conv2``),
the row's children — each offered with its count; and "add this layer" to grow a list.
"Estimate effects" asks for the first of those layer sets estimated to first order, to
paint the tree by each layer's largest estimated effect.
"""

from __future__ import annotations

from functools import partial
from typing import Callable

from PySide6.QtWidgets import QMenu

from hookscope.core import TreeNode
from hookscope.core.base import is_digits
from hookscope.core.plan import matches


def repeated(path: str) -> str | None:
    """``blocks.0.mlp`` -> ``blocks.*.mlp`` (the last numbered piece made a wildcard)."""
    parts = path.split(".")
    for i in range(len(parts) - 1, -1, -1):
        if is_digits(parts[i]):
            return ".".join([*parts[:i], "*", *parts[i + 1:]])
    return None


def sweep_choices(root: TreeNode, path: str) -> list[tuple[str, str]]:
    """``(menu text, layer axis value)`` for a right-click on ``path``."""
    nodes = [n for n in root.walk() if n.path and n.alias_of is None]
    node = next((n for n in nodes if n.path == path), None)
    if node is None:
        return []
    out: list[tuple[str, str]] = []
    pattern = repeated(path)
    if pattern is not None:
        n = sum(1 for x in nodes if matches(pattern, x.path))
        if n > 1:
            out.append((f"Sweep over {pattern} ({n} layers)", pattern))
    same = [x.path for x in nodes if x.type_name == node.type_name]
    if 1 < len(same) <= 64 and (pattern is None or len(same) != n):
        shown = ", ".join(same[:3]) + (", …" if len(same) > 3 else "")
        out.append((f"Sweep over the {len(same)} {node.type_name} layers ({shown})",
                    ",".join(same)))
    if node.children:
        out.append((f"Sweep over its {len(node.children)} children ({path}.*)", f"{path}.*"))
    return out


def add_sweep_entries(menu: QMenu, root: TreeNode | None, path: str,
                      emit: Callable[[str, bool], None],
                      estimate: Callable[[str], None] | None = None) -> None:
    """Append the sweep entries for ``path`` to ``menu``; ``emit(value, add)``;
    ``estimate(value)``: "Estimate effects" over the first layer set offered (or the row)."""
    if root is None or not path:
        return
    menu.addSeparator()
    choices = sweep_choices(root, path)
    if estimate is not None:
        value = choices[0][1] if choices else path
        menu.addAction(f"Estimate effects of {value if len(value) <= 40 else value[:39] + '…'}",
                       partial(estimate, value)).setObjectName("actionEstimateEffects")
    for text, value in choices:
        menu.addAction(text, partial(emit, value, False)).setObjectName("actionSweepOver")
    menu.addAction(f"Add {path} to the sweep's layers",
                   partial(emit, path, True)).setObjectName("actionSweepAdd")
