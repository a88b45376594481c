"""Dependencies point one way: app -> widgets -> core; core never imports Qt.

Checked on the source (every import statement, including ones inside
functions), so a lazy import cannot sneak past.
"""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
QT = ("PySide6", "PyQt5", "PyQt6", "pyqtgraph", "qtpy", "superqt", "shiboken6", "pytestqt")


def imported_modules(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(), filename=str(path))
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: resolve against the file's own package
                pkg = path.parent.relative_to(ROOT).parts
                base = ["hookscope", *pkg[: len(pkg) - node.level + 1]]
                out.append((node.lineno, ".".join(base + ([node.module] if node.module else []))))
            elif node.module:
                out.append((node.lineno, node.module))
    return out


def violations(folder: str, forbidden: tuple[str, ...]) -> list[str]:
    bad = []
    for f in sorted((ROOT / folder).rglob("*.py")):
        for line, mod in imported_modules(f):
            if any(mod == f_ or mod.startswith(f_ + ".") for f_ in forbidden):
                bad.append(f"{f.relative_to(ROOT)}:{line} imports {mod}")
    return bad


@pytest.mark.parametrize("folder, forbidden", [
    ("core", QT + ("hookscope.widgets", "hookscope.app")),
    ("widgets", ("hookscope.app",)),
])
def test_dependencies_point_one_way(folder, forbidden):
    assert violations(folder, forbidden) == []


def test_checker_sees_a_violation(tmp_path, monkeypatch):
    # The check itself must be able to fail: plant a Qt import in a fake core.
    fake = tmp_path / "core"
    fake.mkdir()
    (fake / "bad.py").write_text("def f():\n    from PySide6 import QtCore\n")
    monkeypatch.setattr(__import__(__name__), "ROOT", tmp_path)
    assert violations("core", QT) == ["core/bad.py:2 imports PySide6"]


def test_core_imports_without_qt():
    import subprocess
    import sys

    code = ("import sys, hookscope.core, hookscope.app.headless; "
            "bad = [m for m in sys.modules if m.split('.')[0] in ('PySide6', 'pyqtgraph', 'superqt')]; "
            "print(bad); sys.exit(1 if bad else 0)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
