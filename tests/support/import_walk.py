"""Reading a module's imports from its syntax tree, for the tests that keep the layers
(tests/test_floors.py) and forbid import cycles (tests/test_import_cycles.py)."""

from __future__ import annotations

import ast
from typing import Iterator


def runtime_nodes(tree: ast.AST) -> Iterator[ast.AST]:
    """Every node except those under ``if TYPE_CHECKING:`` (their ``else:`` runs)."""
    stack = [tree]
    while stack:
        node = stack.pop()
        yield node
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                stack.extend(child.orelse)
                continue
            stack.append(child)
