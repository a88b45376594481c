"""The code a file names is hashed in the runner's thread, never the window's, at most twice a
load (the check, and the check again just before the import), and the question still comes
before anything runs.

Hashing a big package's unit takes a second; on the GUI thread that is a frozen window.
Every call of :func:`~hookscope.core.model.code_unit.unit_digest` is counted by the thread
it ran in and the request the runner had in flight then. The dialog is answered with clicks.
"""

from __future__ import annotations

import json
import sys
import threading
from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel

from hookscope.core import Session
from hookscope.core.model import CodeTrust, CodeTrustError
from hookscope.core.model.code_trust import code_to_run
from hookscope.core.model.code_unit import unit_digest
from hookscope.core.session import LoadFailed
from support.thread_calls import count_calls

PACKAGE = "trust_thread_pkg"
MODEL = """\
import pathlib
pathlib.Path({marker!r}).write_text("ran")
import torch
from torch import nn
from {package}.sub import layers


def build():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(3, layers.WIDTH), nn.ReLU()), torch.ones(1, 3)
"""


def package_session(folder: Path, monkeypatch) -> tuple[Path, Path]:
    """A session file naming ``trust_thread_pkg.sub.model:build``, a factory module in a
    package folder with modules beside it (the unit is the package's folder)."""
    pkg = folder / PACKAGE
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "sub" / "layers.py").write_text("WIDTH = 4\n")
    (pkg / "util.py").write_text("def helper():\n    return 1\n")
    marker = folder / "MODEL_RAN"
    (pkg / "sub" / "model.py").write_text(MODEL.format(marker=str(marker), package=PACKAGE))
    monkeypatch.syspath_prepend(str(folder))
    for name in [n for n in sys.modules if n == PACKAGE or n.startswith(PACKAGE + ".")]:
        monkeypatch.delitem(sys.modules, name)
    path = folder / "pkg.hookscope.json"
    path.write_text(json.dumps({"format": "hookscope-session", "version": 1,
                                "model": {"spec": f"{PACKAGE}.sub.model:build"}}))
    return path, marker


def forget_package(monkeypatch) -> None:
    """Import it afresh next time (so a load would run its code again)."""
    for name in [n for n in sys.modules if n == PACKAGE or n.startswith(PACKAGE + ".")]:
        monkeypatch.delitem(sys.modules, name)


def count_hashes(monkeypatch, runner):
    """Every ``unit_digest`` call from now on, as ``(on the GUI thread?, request in flight)``."""
    return count_calls(monkeypatch, {"unit_digest": unit_digest},
                       lambda: (threading.current_thread() is threading.main_thread(),
                                runner.in_flight))


def hashes(seen) -> dict[tuple[bool, int | None], int]:
    return {where: n for (_, where), n in seen.items()}


def wait_question(qtbot, win):
    qtbot.waitUntil(lambda: win.trust_gate.dialog is not None and win.trust_gate.dialog.isVisible(),
                    timeout=10_000)
    return win.trust_gate.dialog


def wait_loaded(qtbot, win, spec_end: str) -> None:
    qtbot.waitUntil(lambda: win.loaded is not None and win.loaded.spec.endswith(spec_end)
                    and win.last_result is not None and win.is_idle(), timeout=30_000)


def click(qtbot, button) -> None:
    qtbot.mouseClick(button, Qt.MouseButton.LeftButton)


def test_opening_a_package_factory_never_hashes_on_the_gui_thread(window, qtbot, tmp_path,
                                                                  monkeypatch):
    path, marker = package_session(tmp_path, monkeypatch)
    wait_loaded(qtbot, window, "demo:clamp")
    seen = count_hashes(monkeypatch, window.session.runner)
    window.open_session(str(path))
    dlg = wait_question(qtbot, window)
    assert "5 files in all" in dlg.findChild(QLabel, "trustCodeText").text()
    assert not marker.exists() and window.loaded.spec == "demo:clamp"   # asked first
    asked = hashes(seen)
    assert asked and not any(gui for gui, _ in asked), asked   # hashed, but not here
    click(qtbot, dlg.always)
    wait_loaded(qtbot, window, "model:build")
    assert marker.exists() and window.loaded.module[0].out_features == 4

    marker.unlink()
    window.load("demo:clamp")
    wait_loaded(qtbot, window, "demo:clamp")
    forget_package(monkeypatch)
    window.open_session(str(path))    # always trusted at this hash: opens without asking
    wait_loaded(qtbot, window, "model:build")
    assert marker.exists() and window.trust_gate.dialog is None
    on_gui = {where: n for where, n in hashes(seen).items() if where[0]}
    assert not on_gui, on_gui


def test_a_load_hashes_the_unit_at_most_twice(window, qtbot, tmp_path, monkeypatch):
    path, marker = package_session(tmp_path, monkeypatch)
    wait_loaded(qtbot, window, "demo:clamp")
    seen = count_hashes(monkeypatch, window.session.runner)
    window.open_session(str(path))
    dlg = wait_question(qtbot, window)
    refused = hashes(seen)
    assert sum(refused.values()) == 1, refused     # the refusal: one hash, in the runner
    click(qtbot, dlg.run_once)
    wait_loaded(qtbot, window, "model:build")
    assert marker.exists()
    by_load = hashes(seen)
    loads = {rid for _, rid in by_load}
    assert len(loads) == 2 and None not in loads, by_load   # the refused load, the one run
    assert all(n <= 2 for n in by_load.values()), by_load   # the check, the check again
    assert sum(by_load.values()) == 3, by_load


def test_a_session_load_under_a_yes_hashes_twice_in_the_runner(tmp_path, monkeypatch):
    path, marker = package_session(tmp_path, monkeypatch)
    spec = f"{PACKAGE}.sub.model:build"
    trust = CodeTrust.from_data().granting(code_to_run(spec))
    s = Session()
    try:
        seen = count_hashes(monkeypatch, s.runner)
        future = s.open_model(spec, trust=trust, run_after=False)
        assert not hashes(seen)       # nothing hashed on the caller's thread
        future.result(timeout=30)
        assert s.model is not None and marker.exists()
        assert hashes(seen) == {(False, future.request_id): 2}
    finally:
        s.close()


def test_a_file_changed_after_the_yes_is_refused(window, qtbot, tmp_path, monkeypatch):
    path, marker = package_session(tmp_path, monkeypatch)
    wait_loaded(qtbot, window, "demo:clamp")
    window.open_session(str(path))
    dlg = wait_question(qtbot, window)
    layers = tmp_path / PACKAGE / "sub" / "layers.py"
    layers.write_text(f"import pathlib\npathlib.Path({str(marker)!r}).write_text('ran')\n"
                      "WIDTH = 5\n")
    click(qtbot, dlg.run_once)
    qtbot.waitUntil(lambda: "changed after you said yes" in window.error_text(), timeout=30_000)
    assert not marker.exists() and window.loaded.spec == "demo:clamp"
    assert window.trust_gate.dialog is None     # said, not asked again in a loop
    assert f"{PACKAGE}.sub.model" not in sys.modules


def test_a_refused_load_tells_its_code_in_load_failed_and_its_future(tmp_path, monkeypatch):
    path, marker = package_session(tmp_path, monkeypatch)
    spec = f"{PACKAGE}.sub.model:build"
    expected = code_to_run(spec)
    s = Session()
    try:
        events = []
        s.subscribe(events.append)
        seen = count_hashes(monkeypatch, s.runner)
        future = s.open_model(spec, trust=CodeTrust.from_data(), run_after=False)
        assert not hashes(seen)       # the caller gets its future at once
        with pytest.raises(CodeTrustError, match="runs code") as info:
            future.result(timeout=30)
        failed = [e for e in events if isinstance(e, LoadFailed)]
        assert len(failed) == 1 and failed[0].request_id == future.request_id
        assert failed[0].code == info.value.code == expected
        assert failed[0].value == failed[0].message == str(info.value)
        assert s.model is None and not marker.exists()
        assert hashes(seen) == {(False, future.request_id): 1}
    finally:
        s.close()
