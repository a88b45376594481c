"""Session's public surface stays small enough to hold in one's head, and typed.

At most 40 public methods (properties counted apart); every public method and
property says what it returns, and none returns ``Any``. The answers of its
runner are applied by the session itself: no other module of the session floor
imports the session module back or reaches into a Session's private state.
"""

import ast
import inspect
import typing
from pathlib import Path

from hookscope.core import RunResult, Session

SESSION_FLOOR = Path(__file__).resolve().parents[2] / "core" / "session"
MAX_METHODS = 40


def public_members() -> tuple[dict[str, typing.Callable], dict[str, property]]:
    """Session's public methods (class and static ones too) and its public properties."""
    methods, props = {}, {}
    for name, value in vars(Session).items():
        if name.startswith("_"):
            continue
        if isinstance(value, property):
            props[name] = value
        elif isinstance(value, (classmethod, staticmethod)):
            methods[name] = value.__func__
        elif inspect.isfunction(value):
            methods[name] = value
    return methods, props


def test_at_most_forty_public_methods():
    methods, props = public_members()
    assert len(methods) <= MAX_METHODS, sorted(methods)
    # the count a reader meets: methods, then properties, both listed when this fails
    assert len(methods) + len(props) <= MAX_METHODS + 10, (sorted(methods), sorted(props))


def test_every_public_method_and_property_has_a_real_return_type():
    methods, props = public_members()
    functions = {**methods, **{name: p.fget for name, p in props.items()}}
    untyped, any_typed = [], []
    for name, fn in functions.items():
        hints = typing.get_type_hints(fn)
        if "return" not in hints:
            untyped.append(name)
        elif hints["return"] is typing.Any:
            any_typed.append(name)
    assert not untyped, f"no return annotation: {untyped}"
    assert not any_typed, f"returns Any: {any_typed}"


def test_run_returns_a_run_result():
    assert typing.get_type_hints(Session.run)["return"] is RunResult
    assert typing.get_type_hints(Session.__init__)  # the module's names all resolve


def _private_names() -> set[str]:
    """A Session's private attributes and methods."""
    s = Session(runner_factory=None)
    return ({n for n in vars(s) if n.startswith("_") and not n.startswith("__")}
            | {n for n in vars(Session) if n.startswith("_") and not n.startswith("__")})


def test_no_other_session_module_reaches_into_a_session():
    private = _private_names()
    assert "_requests" in private and "_emit" in private  # the names this test looks for
    offenders = []
    for path in sorted(SESSION_FLOOR.glob("*.py")):
        if path.name in ("session.py", "__init__.py"):
            continue
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module == "session":
                offenders.append(f"{path.name}:{node.lineno} imports the session module back")
            if (isinstance(node, ast.Attribute) and node.attr in private
                    and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"))):
                offenders.append(f"{path.name}:{node.lineno} touches .{node.attr}")
    assert not offenders, offenders


def test_the_answers_are_applied_by_the_session():
    assert not (SESSION_FLOOR / "session_answers.py").exists()
