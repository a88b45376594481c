"""A yes to a model's code covers every file its import could run, and nothing else runs.

Each hostile fixture is built here: a package whose parent ``__init__.py`` is edited
after the yes, a factory whose sibling module is edited after the yes, a
``__pycache__`` holding a real ``.pyc`` compiled from other code (placed where the
import system would pick it up), a folder too big to hash. The hostile code writes a
marker file if it ever runs. A callable defined anywhere in the named module's own
package is a factory; one re-exported from elsewhere (``os.abort``) is not.
"""

from __future__ import annotations

import importlib.util
import json
import os
import py_compile
import subprocess
import sys
from pathlib import Path

import pytest

from hookscope.core import Session, SpecError, load_model
from hookscope.core.model.code_trust import MODULE, PYTHON_FILE, CodeTrust, CodeTrustError, code_to_run
from hookscope.core.model.code_unit import MAX_BYTES, MAX_FILES
from hookscope.core.model.trust_store import TrustStore

MARK = "import pathlib\npathlib.Path({marker!r}).write_text('ran')\n"
FACTORY = "from torch import nn\n\n\ndef build():\n    return nn.Linear(3, {width})\n"


def forget(monkeypatch, *names: str) -> None:
    """Drop ``names`` (and their submodules) from ``sys.modules`` for this test only."""
    for name in list(sys.modules):
        if name in names or name.startswith(tuple(n + "." for n in names)):
            monkeypatch.delitem(sys.modules, name)


def package(root: Path, name: str) -> str:
    """``name/__init__.py``, ``name/sub/__init__.py`` and ``name/sub/model.py:build``."""
    (root / name / "sub").mkdir(parents=True)
    (root / name / "__init__.py").write_text("")
    (root / name / "sub" / "__init__.py").write_text("")
    (root / name / "sub" / "model.py").write_text(FACTORY.format(width=2))
    return f"{name}.sub.model:build"


def factory_with_helper(folder: Path, helper_mod: str) -> str:
    """``folder/model.py:build``, whose model's width comes from ``helper_mod.WIDTH``."""
    folder.mkdir(exist_ok=True)
    (folder / f"{helper_mod}.py").write_text("WIDTH = 2\n")
    (folder / "model.py").write_text(f"from torch import nn\nimport {helper_mod}\n\n\n"
                                     f"def build():\n    return nn.Linear(3, {helper_mod}.WIDTH)\n")
    return f"{folder}/model.py:build"


def plant_pyc(source: Path, hostile: str, mode: str, scratch: Path) -> Path:
    """A real ``.pyc`` of ``hostile`` placed where the import system looks for ``source``'s
    bytecode. ``unchecked-hash``: a pyc the import system never checks against its
    source; ``timestamp``: its header claims ``source``'s mtime and size, so it reads
    as up to date."""
    other = scratch / f"other_{source.stem}.py"
    other.write_text(hostile)
    target = Path(importlib.util.cache_from_source(str(source)))
    target.parent.mkdir(parents=True, exist_ok=True)
    if mode == "unchecked-hash":
        py_compile.compile(str(other), cfile=str(target), doraise=True,
                           invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH)
    else:
        py_compile.compile(str(other), cfile=str(target), doraise=True,
                           invalidation_mode=py_compile.PycInvalidationMode.TIMESTAMP)
        st = source.stat()
        data = bytearray(target.read_bytes())
        data[8:12] = (int(st.st_mtime) & 0xFFFFFFFF).to_bytes(4, "little")
        data[12:16] = (st.st_size & 0xFFFFFFFF).to_bytes(4, "little")
        target.write_bytes(bytes(data))
    return target


def trusted(spec: str) -> CodeTrust:
    """A file's trust, with the person's yes to ``spec``'s code as it is now."""
    return CodeTrust.from_data().granting(code_to_run(spec))


# -- what the yes covers ---------------------------------------------------------------
def test_a_parent_init_edited_after_the_yes_is_asked_about_again(tmp_path, monkeypatch):
    spec = package(tmp_path, "trustpkg_parent")
    monkeypatch.syspath_prepend(str(tmp_path))
    forget(monkeypatch, "trustpkg_parent")
    code = code_to_run(spec)
    yes = trusted(spec)
    marker = tmp_path / "PARENT_INIT_RAN"
    (tmp_path / "trustpkg_parent" / "__init__.py").write_text(MARK.format(marker=str(marker)))
    with pytest.raises(CodeTrustError, match="changed after you said yes") as info:
        load_model(spec, trust=yes)
    assert not marker.exists() and "trustpkg_parent" not in sys.modules
    assert info.value.code.sha256 != code.sha256
    assert code.kind == MODULE and code.count == 3   # both __init__.py files and model.py
    assert code.folder == str((tmp_path / "trustpkg_parent").resolve())
    assert load_model(spec, trust=trusted(spec)).module.out_features == 2   # asked again: runs
    assert marker.exists()


def test_a_sibling_module_edited_after_the_yes_is_asked_about_again(tmp_path, monkeypatch):
    spec = factory_with_helper(tmp_path / "m", "trust_helper_sibling")
    monkeypatch.syspath_prepend(str(tmp_path / "m"))
    forget(monkeypatch, "trust_helper_sibling")
    yes = trusted(spec)
    marker = tmp_path / "SIBLING_RAN"
    (tmp_path / "m" / "trust_helper_sibling.py").write_text(MARK.format(marker=str(marker)) + "WIDTH = 5\n")
    with pytest.raises(CodeTrustError, match="changed after you said yes"):
        load_model(spec, trust=yes)
    assert not marker.exists() and "trust_helper_sibling" not in sys.modules
    code = code_to_run(spec)
    assert code.kind == PYTHON_FILE and code.count == 2
    assert load_model(spec, trust=trusted(spec)).module.out_features == 5
    assert marker.exists()


def test_a_module_added_beside_the_factory_after_the_yes_is_asked_about(tmp_path, monkeypatch):
    spec = factory_with_helper(tmp_path / "m", "trust_helper_added")
    monkeypatch.syspath_prepend(str(tmp_path / "m"))
    forget(monkeypatch, "trust_helper_added")
    yes = trusted(spec)
    (tmp_path / "m" / "sub").mkdir()
    (tmp_path / "m" / "sub" / "planted.py").write_text("x = 1\n")   # importable as sub.planted
    with pytest.raises(CodeTrustError, match="changed after you said yes"):
        load_model(spec, trust=yes)
    assert code_to_run(spec).count == 3


def test_an_always_trust_entry_does_not_cover_an_edited_sibling(tmp_path, trust_store_dir):
    spec = factory_with_helper(tmp_path / "m", "trust_helper_store")
    store = TrustStore()
    store.add(code_to_run(spec))
    assert store.trusts(code_to_run(spec))
    (tmp_path / "m" / "trust_helper_store.py").write_text("WIDTH = 7\n")
    assert not store.trusts(code_to_run(spec))


def test_the_cli_names_how_many_files_and_their_combined_hash(tmp_path, capsys, monkeypatch):
    from hookscope.app.cli import main

    spec = package(tmp_path, "trustpkg_cli")
    monkeypatch.syspath_prepend(str(tmp_path))
    forget(monkeypatch, "trustpkg_cli")
    session = tmp_path / "s.hookscope.json"
    session.write_text(json.dumps({"format": "hookscope-session", "version": 1,
                                   "model": {"spec": spec}}))
    assert main(["run", "--session", str(session), "--json"]) == 2
    err = capsys.readouterr().err.strip()
    code = code_to_run(spec)
    assert err.count("\n") == 0 and err.startswith("hookscope: error: ")
    assert "3 files under" in err and code.sha256[:16] in err and "--trust-code" in err
    assert "trustpkg_cli" not in sys.modules


# -- bytecode caches are never read for trusted code -------------------------------------
@pytest.mark.parametrize("mode", ["unchecked-hash", "timestamp"])
def test_a_planted_pyc_beside_a_factory_file_does_not_run(tmp_path, monkeypatch, mode):
    name = f"trust_helper_pyc_{mode.replace('-', '_')}"
    spec = factory_with_helper(tmp_path / "m", name)
    monkeypatch.syspath_prepend(str(tmp_path / "m"))
    forget(monkeypatch, name)
    yes = trusted(spec)
    marker = tmp_path / "PYC_RAN"
    pyc = plant_pyc(tmp_path / "m" / f"{name}.py", MARK.format(marker=str(marker)) + "WIDTH = 9\n",
                    mode, tmp_path)
    assert code_to_run(spec) == yes.files[0]   # __pycache__ is no part of the unit: never read
    assert load_model(spec, trust=yes).module.out_features == 2   # the source's WIDTH
    assert not marker.exists() and pyc.exists()


@pytest.mark.parametrize("mode", ["unchecked-hash", "timestamp"])
@pytest.mark.parametrize("how", ["session", "typed"])
def test_a_planted_pyc_of_a_package_module_does_not_run(tmp_path, monkeypatch, mode, how):
    pkg = f"trustpkg_pyc_{how}_{mode.replace('-', '_')}"
    spec = package(tmp_path, pkg)
    monkeypatch.syspath_prepend(str(tmp_path))
    forget(monkeypatch, pkg)
    trust = trusted(spec) if how == "session" else None
    marker = tmp_path / "PYC_RAN"
    hostile = MARK.format(marker=str(marker)) + FACTORY.format(width=9)
    plant_pyc(tmp_path / pkg / "sub" / "model.py", hostile, mode, tmp_path)
    plant_pyc(tmp_path / pkg / "__init__.py", MARK.format(marker=str(marker)), mode, tmp_path)
    assert load_model(spec, trust=trust).module.out_features == 2
    assert not marker.exists()


@pytest.mark.parametrize("prefix", [None, "own-cache"])
def test_source_only_imports_restore_the_bytecode_settings(tmp_path, monkeypatch, prefix):
    if prefix is not None:   # the process's own settings, whatever they are, come back
        monkeypatch.setattr(sys, "pycache_prefix", str(tmp_path / prefix))
        monkeypatch.setattr(sys, "dont_write_bytecode", False)
    before = (sys.pycache_prefix, sys.dont_write_bytecode)
    spec = factory_with_helper(tmp_path / "m", "trust_helper_restore")
    monkeypatch.syspath_prepend(str(tmp_path / "m"))
    forget(monkeypatch, "trust_helper_restore")
    load_model(spec)
    assert (sys.pycache_prefix, sys.dont_write_bytecode) == before
    (tmp_path / "m" / "trust_helper_restore.py").write_text("raise RuntimeError('broken helper')\n")
    forget(monkeypatch, "trust_helper_restore")
    with pytest.raises(SpecError, match="broken helper"):
        load_model(spec)
    assert (sys.pycache_prefix, sys.dont_write_bytecode) == before
    assert not (tmp_path / "m" / "__pycache__").exists()   # nothing written beside the source
    assert not (tmp_path / "own-cache").exists()            # nor in the process's own cache


# -- a folder too big to hash ----------------------------------------------------------------
def test_a_factory_in_a_folder_of_too_many_python_files_is_refused(tmp_path):
    folder = tmp_path / "big"
    folder.mkdir()
    for i in range(MAX_FILES + 1):
        (folder / f"m{i}.py").write_bytes(b"")
    (folder / "model.py").write_text(FACTORY.format(width=2))
    with pytest.raises(SpecError, match=f"more than {MAX_FILES:,} Python files"):
        code_to_run(f"{folder}/model.py:build")
    session = folder / "s.hookscope.json"
    session.write_text(json.dumps({"format": "hookscope-session", "version": 1,
                                   "model": {"spec": "model.py:build"}}))
    with pytest.raises(SpecError, match="cannot be checked.*nothing was run"):
        Session.open_file(session)


def test_a_factory_beside_a_huge_python_file_is_refused_without_reading_it(tmp_path):
    folder = tmp_path / "huge"
    folder.mkdir()
    (folder / "model.py").write_text(FACTORY.format(width=2))
    with open(folder / "blob.py", "wb") as fh:   # sparse: no disk, and never read
        fh.truncate(MAX_BYTES + 1)
    r = subprocess.run([sys.executable, "-m", "hookscope.app.cli", "run", "--session",
                        str(_session(folder, "model.py:build")), "--trust-code", "--json",
                        "--input", "[[1.0, 2.0, 3.0]]"],
                       capture_output=True, text=True, timeout=120)
    # --trust-code says yes to whatever runs: no hash is needed, so nothing is refused
    assert r.returncode == 0, r.stderr
    r = subprocess.run([sys.executable, "-m", "hookscope.app.cli", "run", "--session",
                        str(_session(folder, "model.py:build")), "--json"],
                       capture_output=True, text=True, timeout=120)
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1 and "Traceback" not in r.stderr
    assert f"more than {MAX_BYTES >> 20} MiB" in lines[0]


def _session(folder: Path, spec: str) -> Path:
    path = folder / "s.hookscope.json"
    path.write_text(json.dumps({"format": "hookscope-session", "version": 1, "model": {"spec": spec}}))
    return path


# -- a factory is defined in the named module's own package ----------------------------------
def test_a_factory_re_exported_within_its_own_package_loads(tmp_path, monkeypatch):
    pkg = tmp_path / "trust_reexport"
    pkg.mkdir()
    (pkg / "model.py").write_text("from torch import nn\n\n\nclass Model(nn.Linear):\n"
                                  "    def __init__(self):\n        super().__init__(3, 4)\n\n\n"
                                  "def build():\n    return Model()\n")
    (pkg / "__init__.py").write_text("from .model import Model, build\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    forget(monkeypatch, "trust_reexport")
    assert load_model("trust_reexport:Model").module.out_features == 4
    assert load_model("trust_reexport:build").module.out_features == 4


def test_a_callable_re_exported_from_the_standard_library_is_refused_and_never_called(tmp_path):
    pkg = tmp_path / "trust_abort"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("from os import abort\nfrom os.path import join as build\n")
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    for spec in ("trust_abort:abort", "trust_abort:build"):
        r = subprocess.run([sys.executable, "-m", "hookscope.app.cli", "run", spec, "--json"],
                           capture_output=True, text=True, timeout=120, env=env)
        assert r.returncode == 2, (r.returncode, r.stderr)   # not -6: abort was not called
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and "outside trust_abort" in lines[0] and "Nothing was called" in lines[0]


def test_a_fifo_named_like_a_module_beside_the_factory_is_refused_without_opening_it(tmp_path):
    spec = factory_with_helper(tmp_path / "m", "trust_helper_fifo")
    os.mkfifo(tmp_path / "m" / "pipe_helper.py")   # an import of pipe_helper would block on it
    with pytest.raises(SpecError, match=r"'pipe_helper\.py' is a FIFO"):
        Session.open_file(_session(tmp_path / "m", "model.py:build"))
