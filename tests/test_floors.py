"""The floors of core: widgets/ and app/ use their faces, and no floor has a cycle.

import-linter (``make test``, pyproject's ``[tool.importlinter]``) checks that
floors import only downwards. Here, on the source (every import statement,
including ones inside functions; ``if TYPE_CHECKING:`` blocks excepted, they
never run): widgets/ and app/ import ``hookscope.core`` or a floor's face
(``hookscope.core.FLOOR``), never a module inside a floor; and the modules of
each floor import each other without a cycle.
"""

import ast
from pathlib import Path

import pytest
from support.import_walk import runtime_nodes

ROOT = Path(__file__).resolve().parents[1]
CORE = ROOT / "core"
FLOORS = sorted(p.name for p in CORE.iterdir() if (p / "__init__.py").exists())


def imports_of(path: Path, package: str) -> list[tuple[int, str]]:
    """``(line, absolute module)`` of every runtime import in ``path`` (in ``package``)."""
    out = []
    for node in runtime_nodes(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            # "from PKG import name": name may be a module of PKG
            out += [(node.lineno, f"{mod}.{a.name}") for a in node.names] + [(node.lineno, mod)]
    return out


def core_modules() -> dict[str, Path]:
    mods = {}
    for p in CORE.rglob("*.py"):
        rel = p.relative_to(CORE).with_suffix("")
        parts = [x for x in rel.parts if x != "__init__"]
        mods[".".join(["hookscope.core", *parts])] = p
    return mods


def face_names(module: str) -> set[str]:
    """The names a face's ``__init__.py`` binds itself (a function may share its module's
    name: ``views.wide_views``); any other name imported from it is a submodule's."""
    init = core_modules().get(module)
    if init is None or init.name != "__init__.py":
        return set()
    names = set()
    for node in ast.parse(init.read_text()).body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
    return names


def face_violations(folder: str) -> list[str]:
    deep = {m for m in core_modules() if m.count(".") >= 3}  # hookscope.core.FLOOR.module
    bad = []
    for f in sorted((ROOT / folder).rglob("*.py")):
        tree = ast.parse(f.read_text(), filename=str(f))
        for node in ast.walk(tree):
            # "from FACE import name": name may be a module inside the floor, reached
            # through its face (the face's package attribute is the submodule)
            mods = ([a.name for a in node.names] if isinstance(node, ast.Import)
                    else [node.module or ""] + [f"{node.module}.{a.name}" for a in node.names
                                                if node.module not in deep
                                                and a.name not in face_names(node.module)]
                    if isinstance(node, ast.ImportFrom) and not node.level
                    else [])
            bad += [f"{f.relative_to(ROOT)}:{node.lineno} imports {m}" for m in mods
                    if any(m == d or m.startswith(d + ".") for d in deep)]
    return bad


@pytest.mark.parametrize("folder", ["widgets", "app"])
def test_widgets_and_app_import_only_the_faces(folder):
    assert face_violations(folder) == []


def test_the_face_check_sees_a_deep_import(tmp_path, monkeypatch):
    (tmp_path / "app").mkdir()
    (tmp_path / "app" / "bad.py").write_text("def f():\n    from hookscope.core.engine.run import run\n")
    real = core_modules()
    monkeypatch.setattr(__import__(__name__), "ROOT", tmp_path)
    monkeypatch.setattr(__import__(__name__), "core_modules", lambda: real)
    assert face_violations("app") == ["app/bad.py:2 imports hookscope.core.engine.run"]


def test_the_face_check_sees_a_module_reached_through_a_face(tmp_path, monkeypatch):
    (tmp_path / "app").mkdir()
    (tmp_path / "app" / "bad.py").write_text(
        "from hookscope.core.base import json_safe, write_text\n")
    real = core_modules()
    monkeypatch.setattr(__import__(__name__), "ROOT", tmp_path)
    monkeypatch.setattr(__import__(__name__), "core_modules", lambda: real)
    assert face_violations("app") == ["app/bad.py:1 imports hookscope.core.base.json_safe"]


def module_graph() -> dict[str, set[str]]:
    mods = core_modules()
    graph: dict[str, set[str]] = {m: set() for m in mods}
    for m, p in mods.items():
        package = m if p.name == "__init__.py" else m.rsplit(".", 1)[0]
        for _, target in imports_of(p, package):
            if target in mods and target != m:
                graph[m].add(target)
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str]:
    """One cycle of ``graph`` as a path, or [] when there is none."""
    state: dict[str, int] = {}
    path: list[str] = []

    def visit(n: str) -> list[str]:
        state[n] = 1
        path.append(n)
        for t in sorted(graph.get(n, ())):
            if state.get(t) == 1:
                return path[path.index(t):] + [t]
            if t not in state and (c := visit(t)):
                return c
        path.pop()
        state[n] = 2
        return []

    for n in sorted(graph):
        if n not in state and (c := visit(n)):
            return c
    return []


@pytest.mark.parametrize("floor", FLOORS)
def test_no_import_cycle_inside_a_floor(floor):
    prefix = f"hookscope.core.{floor}."
    graph = {m: {t for t in ts if t.startswith(prefix)}
             for m, ts in module_graph().items() if m.startswith(prefix)}
    assert find_cycle(graph) == []


def test_no_import_cycle_between_floors():
    floors: dict[str, set[str]] = {}
    for m, ts in module_graph().items():
        parts = m.split(".")
        if len(parts) < 3:
            continue  # hookscope.core itself: the face over every floor
        floors.setdefault(parts[2], set()).update(
            t.split(".")[2] for t in ts if t.count(".") >= 2 and t.split(".")[2] != parts[2])
    assert find_cycle(floors) == []


def test_the_cycle_check_sees_a_cycle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) == []


def private_engine_imports(folder: Path) -> list[str]:
    """``file:line imports NAME`` for every ``_``-prefixed name a module under ``folder``
    (a floor of core) imports from the engine."""
    bad = []
    for f in sorted(folder.rglob("*.py")):
        rel = f.relative_to(CORE).with_suffix("")
        package = ".".join(["hookscope.core", *rel.parts[:-1]])  # a module's or an __init__'s
        nodes = runtime_nodes(ast.parse(f.read_text(), filename=str(f)))
        for node in sorted((n for n in nodes if isinstance(n, ast.ImportFrom)),
                           key=lambda n: n.lineno):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            if mod == "hookscope.core.engine" or mod.startswith("hookscope.core.engine."):
                bad += [f"{f.relative_to(ROOT)}:{node.lineno} imports {mod}.{a.name}"
                        for a in node.names if a.name.startswith("_")]
    return bad


def test_fast_plugs_in_through_public_names_only():
    # The speed-ups use the engine's documented interfaces (fast_slot, HookSession and
    # its hooks, the stats layout), never a name the engine keeps to itself.
    assert private_engine_imports(CORE / "fast") == []


def test_the_private_import_check_sees_one(tmp_path, monkeypatch):
    fast = tmp_path / "core" / "fast"
    fast.mkdir(parents=True)
    (fast / "bad.py").write_text("from ..engine.stats import HIST_BINS, _secret\n"
                                 "def f():\n    from hookscope.core.engine.hooks import _hook\n")
    monkeypatch.setattr(__import__(__name__), "ROOT", tmp_path)
    monkeypatch.setattr(__import__(__name__), "CORE", tmp_path / "core")
    assert private_engine_imports(fast) == [
        "core/fast/bad.py:1 imports hookscope.core.engine.stats._secret",
        "core/fast/bad.py:3 imports hookscope.core.engine.hooks._hook"]
