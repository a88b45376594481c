"""No runtime import cycle in core, widgets or app.

An AST walk of the three packages builds the graph of imports that run at run
time: module-level ones and ones inside functions (both execute; only
``if TYPE_CHECKING:`` blocks never do). Relative imports are resolved against
the file's package, and ``from pkg import name`` points at ``pkg.name`` when
that is a module (as import-linter reads it), else at ``pkg``; a name that
``pkg/__init__.py`` does not bind is a submodule even without a .py file (a
compiled extension), so it points at no module of the graph. The strongly
connected components of that graph (Tarjan) are its cycles: there are none.
"""

import ast
import functools
from pathlib import Path

import pytest
from support.import_walk import runtime_nodes

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("core", "widgets", "app")


def modules(root: Path = ROOT) -> dict[str, Path]:
    """``hookscope.PACKAGE.sub.module`` -> its file, for every .py of the three packages."""
    out = {}
    for package in PACKAGES:
        for p in sorted((root / package).rglob("*.py")):
            parts = [x for x in p.relative_to(root).with_suffix("").parts if x != "__init__"]
            out[".".join(["hookscope", *parts])] = p
    return out


@functools.cache
def bound_names(init: Path) -> set[str]:
    """The names a package's ``__init__.py`` binds at its top level."""
    names = set()
    for node in ast.parse(init.read_text()).body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
    return names


def runtime_imports(module: str, path: Path, mods: dict[str, Path]) -> set[str]:
    """The modules of ``mods`` that ``module`` (at ``path``) imports at run time."""
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    out = set()
    for node in runtime_nodes(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1])
                source = f"{base}.{node.module}" if node.module else base
            else:
                source = node.module or ""
            init = mods.get(source)
            for a in node.names:
                sub = f"{source}.{a.name}"
                if a.name == "*":
                    out.add(source)
                elif sub in mods:
                    out.add(sub)
                elif init is None or init.name != "__init__.py" or a.name in bound_names(init):
                    out.add(source)
    return (out & set(mods)) - {module}


def import_graph(root: Path = ROOT) -> dict[str, set[str]]:
    mods = modules(root)
    return {m: runtime_imports(m, p, mods) for m, p in mods.items()}


def cycles(graph: dict[str, set[str]]) -> list[frozenset[str]]:
    """The strongly connected components of ``graph`` with more than one node (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[frozenset[str]] = []

    def strongconnect(v: str) -> None:
        # Iterative, so a long import chain cannot hit the recursion limit.
        work = [(v, iter(sorted(graph.get(v, ()))))]
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        while work:
            node, edges = work[-1]
            for w in edges:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(graph.get(w, ())))))
                    break
                if w in on_stack:
                    low[node] = min(low[node], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = set()
                    while True:
                        w = stack.pop()
                        on_stack.discard(w)
                        component.add(w)
                        if w == node:
                            break
                    if len(component) > 1:
                        found.append(frozenset(component))

    for v in sorted(graph):
        if v not in index:
            strongconnect(v)
    return found


def cycles_in(package: str) -> list[frozenset[str]]:
    prefix = f"hookscope.{package}"
    return [c for c in cycles(import_graph())
            if any(m == prefix or m.startswith(prefix + ".") for m in c)]


def shown(cs: list[frozenset[str]]) -> list[list[str]]:
    return sorted(sorted(c) for c in cs)


@pytest.mark.parametrize("package", PACKAGES)
def test_no_runtime_import_cycle(package):
    assert shown(cycles_in(package)) == []


def test_tarjan_finds_each_cycle_once():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": {"e"}, "e": {"d"}, "f": {"a"}}
    assert shown(cycles(graph)) == [["a", "b", "c"], ["d", "e"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


@pytest.mark.parametrize("body", [
    # module level, relative
    "from .b import f\n",
    # inside a function: it runs too
    "def g():\n    from .b import f\n",
    # a submodule reached through its package
    "from . import b\n",
    # absolute
    "import hookscope.core.b\n",
])
def test_the_walk_sees_an_import_cycle(tmp_path, body):
    core = tmp_path / "core"
    core.mkdir()
    (core / "__init__.py").write_text("")
    (core / "a.py").write_text(body)
    (core / "b.py").write_text("from hookscope.core.a import g\n")
    for package in PACKAGES[1:]:
        (tmp_path / package).mkdir()
    assert shown(cycles(import_graph(tmp_path))) == [["hookscope.core.a", "hookscope.core.b"]]


def test_the_walk_skips_type_checking_imports(tmp_path):
    core = tmp_path / "core"
    core.mkdir()
    (core / "__init__.py").write_text("")
    (core / "a.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .b import f\n")
    (core / "b.py").write_text("from .a import g\n")
    for package in PACKAGES[1:]:
        (tmp_path / package).mkdir()
    assert cycles(import_graph(tmp_path)) == []
