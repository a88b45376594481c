"""Core imports at the top of its modules.

With the floors pointing one way nothing in core needs to import its own
modules late: an import inside a function hides a dependency from a reader
and from import-linter's layer check until it runs. At most
``MAX_LAZY_OWN`` such imports may remain. Any import left inside a core
function (of core or of an optional or slow third-party package: transformers,
accelerate, Pillow, ...) says why on its own line, with a comment.
``if TYPE_CHECKING:`` blocks never run and are not counted.
"""

import ast
import io
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MAX_LAZY_OWN = 5


def _runtime_children(node: ast.AST):
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
            yield from child.orelse
        else:
            yield child


def lazy_imports(path: Path) -> list[tuple[int, bool, bool]]:
    """``(line, own, commented)`` of every import statement inside a function of ``path``:
    ``own`` for a module of hookscope, ``commented`` when its first line has a comment."""
    src = path.read_text()
    comments = {tok.start[0] for tok in tokenize.generate_tokens(io.StringIO(src).readline)
                if tok.type == tokenize.COMMENT}
    out = []

    def walk(node: ast.AST, in_function: bool) -> None:
        for child in _runtime_children(node):
            if in_function and isinstance(child, (ast.Import, ast.ImportFrom)):
                names = ([child.module or ""] if isinstance(child, ast.ImportFrom)
                         else [a.name for a in child.names])
                own = (isinstance(child, ast.ImportFrom) and child.level > 0) or any(
                    n == "hookscope" or n.startswith("hookscope.") for n in names)
                out.append((child.lineno, own, child.lineno in comments))
            walk(child, in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                          ast.Lambda)))

    walk(ast.parse(src, filename=str(path)), False)
    return out


def lazy_in(folder: Path) -> dict[str, list[tuple[int, bool, bool]]]:
    return {str(p.relative_to(folder.parent)): found for p in sorted(folder.rglob("*.py"))
            if (found := lazy_imports(p))}


def test_own_modules_are_imported_at_the_top():
    own = [f"{f}:{line}" for f, found in lazy_in(ROOT / "core").items()
           for line, is_own, _ in found if is_own]
    assert len(own) <= MAX_LAZY_OWN, own


def test_every_import_left_in_a_function_says_why():
    silent = [f"{f}:{line}" for f, found in lazy_in(ROOT / "core").items()
              for line, _, commented in found if not commented]
    assert silent == []


def test_the_count_sees_lazy_imports(tmp_path):
    core = tmp_path / "core"
    core.mkdir()
    (core / "a.py").write_text(
        "from typing import TYPE_CHECKING\n"
        "from .b import top\n"                       # at the top: not counted
        "if TYPE_CHECKING:\n"
        "    from .b import typed\n"                 # never runs: not counted
        "def f():\n"
        "    from .b import g\n"                     # own, silent
        "    import hookscope.core.c  # needed late\n"  # own, says why
        "    import json\n"                          # stdlib, silent
        "    if True:\n"
        "        from PIL import Image  # optional\n"
        "class C:\n"
        "    def m(self):\n"
        "        g = lambda: __import__('x')\n"
        "        from ..x import y\n")
    assert lazy_in(core) == {"core/a.py": [(6, True, False), (7, True, True), (8, False, False),
                                          (10, False, True), (14, True, False)]}
