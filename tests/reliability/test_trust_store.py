"""The "Always trust" store: a file is trusted at one hash only, and a damaged, foreign,
huge or non-regular store file trusts nothing and never hangs."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from hookscope.core.model.code_trust import code_to_run
from hookscope.core.model.trust_store import FILE_NAME, MAX_BYTES, TrustStore, config_dir


def factory(folder: Path) -> str:
    (folder / "net.py").write_text("from torch import nn\n\n\ndef make():\n    return nn.Linear(2, 2)\n")
    return f"{folder}/net.py:make"


def test_config_dir_follows_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("HOOKSCOPE_CONFIG_DIR", str(tmp_path / "own"))
    assert config_dir() == tmp_path / "own"
    monkeypatch.delenv("HOOKSCOPE_CONFIG_DIR")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    assert config_dir() == tmp_path / "xdg" / "hookscope"


def test_a_file_is_trusted_at_its_hash_and_an_edit_drops_it(tmp_path, trust_store_dir):
    spec = factory(tmp_path)
    store = TrustStore()
    assert store.path == trust_store_dir / FILE_NAME
    code = code_to_run(spec)
    assert not store.trusts(code)
    store.add(code)
    assert store.trusts(code)
    with open(tmp_path / "net.py", "a") as fh:
        fh.write("# edited\n")
    edited = code_to_run(spec)
    assert edited.sha256 != code.sha256 and not store.trusts(edited)
    store.add(edited)   # the newer hash replaces the older one
    files = json.loads(store.path.read_text())["files"]
    assert [(f["path"], f["sha256"]) for f in files] == [(edited.origin, edited.sha256)]
    assert not store.trusts(code)


@pytest.mark.parametrize("content", [
    b"", b"not json", b'{"format": "something-else", "files": []}', b"[1, 2]",
    b'{"format": "hookscope-trusted-code", "files": {"path": 1}}', b"\xff\xfe",
    b"[" * 100_000,
])
def test_a_damaged_or_foreign_store_trusts_nothing(tmp_path, trust_store_dir, content):
    code = code_to_run(factory(tmp_path))
    (trust_store_dir / FILE_NAME).write_bytes(content)
    assert not TrustStore().trusts(code)
    TrustStore().add(code)   # replaced whole by the next "Always"
    assert TrustStore().trusts(code)


def test_a_huge_store_is_not_read_whole(tmp_path, trust_store_dir):
    code = code_to_run(factory(tmp_path))
    entry = {"path": code.origin, "sha256": code.sha256, "kind": code.kind}
    doc = json.dumps({"format": "hookscope-trusted-code", "files": [entry], "pad": "x" * MAX_BYTES})
    (trust_store_dir / FILE_NAME).write_text(doc)
    assert not TrustStore().trusts(code)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_a_fifo_as_the_store_does_not_hang(tmp_path, trust_store_dir):
    os.mkfifo(trust_store_dir / FILE_NAME)
    assert not TrustStore().trusts(code_to_run(factory(tmp_path)))


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_a_fifo_named_as_a_factory_is_refused_without_hanging(tmp_path):
    from hookscope.core import SpecError

    os.mkfifo(tmp_path / "net.py")
    with pytest.raises(SpecError):
        code_to_run(f"{tmp_path}/net.py:make")
