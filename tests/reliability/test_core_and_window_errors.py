"""The same mistakes through the core API (a HookscopeError subclass, chained from the cause)
and through the window's exports (the banner, no file left)."""

from __future__ import annotations

import os

import pytest
import torch

from hookscope.core import (HookscopeError, InputError, Plan, SpecError, compare, load_model,
                            parse_input)
from hookscope.core.base.atomic_write import write_text
from hookscope.core.export.export import save_captures

import catalogue_files
import faulty_models as fm


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    return catalogue_files.build(tmp_path_factory.mktemp("core-catalogue"))


CORE_CASES = [
    # call, error class, cause class (None: raised directly, nothing to chain)
    (lambda f: parse_input("random:100000x100000"), InputError, None),
    (lambda f: parse_input(str(f["huge.npy"])), InputError, None),
    (lambda f: parse_input(str(f["giant.png"])), InputError, Exception),
    (lambda f: parse_input(str(f["postscript.png"])), InputError, Exception),
    (lambda f: parse_input("-" * 5000 + "1"), InputError, RecursionError),
    (lambda f: parse_input("+" * 100000 + "1"), InputError, MemoryError),
    (lambda f: parse_input(str(f["truncated.npy"])), InputError, None),
    (lambda f: parse_input(str(f["evil_input.pt"])), InputError, Exception),
    (lambda f: load_model("m" * 5000 + ".py:make"), SpecError, None),
    (lambda f: load_model(str(f["truncated.pt2"])), SpecError, Exception),
    (lambda f: load_model("faulty_models:non_finite", weights=str(f["broken.safetensors"])),
     SpecError, Exception),
    (lambda f: load_model(f"{f['exits_at_import.py']}:make"), SpecError, SystemExit),
    (lambda f: write_text(f["a_file"] / "x.json", "{}"), HookscopeError, OSError),
]


@pytest.mark.parametrize("case", range(len(CORE_CASES)))
def test_core_api_raises_project_errors_chained(case, files):
    call, error, cause = CORE_CASES[case]
    with pytest.raises(error) as info:
        call(files)
    if cause is not None:
        assert isinstance(info.value.__cause__, cause)
    assert not files["MARKER"].exists()


@pytest.mark.parametrize("factory,cause", [(fm.raises_base_exception, fm.Abort),
                                           (fm.calls_sys_exit, SystemExit)])
def test_compare_in_the_cli_wrapper_restores_hooks_on_base_exceptions(factory, cause):
    from hookscope.core.base.errors import ForwardError
    from hookscope.core.model.user_code import user_code

    module, x = factory()
    with pytest.raises(ForwardError) as info:
        with user_code("the model's forward", "m", ForwardError):
            compare(module, x, Plan(capture=("0.inner",), clamp={"1": (0.0, 1.0)}), "cpu")
    assert isinstance(info.value.__cause__, cause)
    assert fm.hooks_left(module) == 0


def test_keyboard_interrupt_in_compare_restores_hooks_and_propagates():
    module, x = fm.raises_keyboard_interrupt()
    with pytest.raises(KeyboardInterrupt):
        compare(module, x, Plan(capture=("0.inner",), clamp={"1": (0.0, 1.0)}), "cpu")
    assert fm.hooks_left(module) == 0


def test_window_exports_into_an_unwritable_folder_show_the_banner(make_window, qtbot, tmp_path):
    from hookscope.app.export_actions import export_captures, export_script

    win = make_window(["demo:features", "--capture", "fc1"])
    qtbot.waitUntil(lambda: win.last_result is not None and win.is_idle(), timeout=30_000)
    ro = catalogue_files.unwritable_folder(tmp_path)
    if ro is None:
        pytest.skip("no unwritable folder on this machine")
    before = set(os.listdir(ro))
    for export, name in ((export_captures, "c.npz"), (export_captures, "c.safetensors"),
                         (export_script, "s.py")):
        with qtbot.waitSignal(win.errorShown, timeout=5_000) as blocker:
            assert export(win.session, win.ui, str(ro / name)) is None
        assert blocker.args[0].startswith(f"cannot write {ro / name}")
        assert win.banner.isVisible()
    assert set(os.listdir(ro)) == before
    (tmp_path / "ro").chmod(0o755)


def test_save_captures_failure_leaves_nothing(tmp_path):
    module = torch.nn.Sequential(torch.nn.Linear(3, 2))
    result = compare(module, torch.ones(1, 3), Plan(capture=("0",)), "cpu")
    blocker = tmp_path / "plain_file"
    blocker.write_text("x")
    with pytest.raises(HookscopeError, match="cannot create the folder"):
        save_captures(result.captures, blocker / "sub" / "c.npz")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["plain_file"]
