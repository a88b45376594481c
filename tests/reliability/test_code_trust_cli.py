"""A session file is data: code it names (a factory file, a module, a pickle) runs only
with --trust-code; a ``module:callable`` spec can never name the standard library or
Hookscope itself; an ``hf:`` folder's own code never runs and nothing reads stdin.

Every hostile fixture is built here, and each one leaves a marker if its code ran.
"""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

from hookscope.app.cli import main
from hookscope.core import Session, SpecError, load_model
from hookscope.core.model.code_trust import (MODULE, PYTHON_FILE, CodeTrust, CodeTrustError,
                                             code_to_run)

from hostile_files import pickle_payload

EVIL = """\
import pathlib
pathlib.Path({marker!r}).write_text("ran")
import torch
from torch import nn


def build():
    torch.manual_seed(0)
    return nn.Linear(3, 2), torch.ones(1, 3)
"""


def evil_session(folder: Path, spec: str = "evil.py:build", **extra) -> tuple[Path, Path]:
    """A session file naming ``spec`` beside an evil.py that writes a marker when imported."""
    marker = folder / "MARKER"
    (folder / "evil.py").write_text(EVIL.format(marker=str(marker)))
    doc = {"format": "hookscope-session", "version": 1, "model": {"spec": spec}, **extra}
    path = folder / "shared.hookscope.json"
    path.write_text(json.dumps(doc))
    return path, marker


def run_cli(*argv: str, stdin: str = "") -> subprocess.CompletedProcess:
    """``hookscope ARGV`` in its own process: a call to os.abort() would kill it, not us."""
    return subprocess.run([sys.executable, "-m", "hookscope.app.cli", *argv], input=stdin,
                          capture_output=True, text=True, timeout=180)


def one_error_line(err: str) -> str:
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("hookscope: error: "), err
    return lines[0]


# -- a factory file beside a session -------------------------------------------------
def test_a_session_naming_a_factory_file_is_refused_without_trust_code(tmp_path, capsys):
    path, marker = evil_session(tmp_path)
    assert main(["run", "--session", str(path), "--json"]) == 2
    out, err = capsys.readouterr()
    line = one_error_line(err)
    code = code_to_run(f"{tmp_path}/evil.py:build")   # evil.py, the one Python file there
    assert code.count == 1 and code.folder == str(tmp_path.resolve())
    assert out == "" and "evil.py" in line and code.sha256[:16] in line and "--trust-code" in line
    assert "1 file under" in line
    assert not marker.exists()


@pytest.mark.parametrize("flag", ["--trust-code", "--trust-pickle"])
def test_trust_code_and_its_old_name_reach_the_session_load(tmp_path, capsys, flag):
    path, marker = evil_session(tmp_path)
    assert main(["run", "--session", str(path), flag, "--json"]) == 0
    out, _ = capsys.readouterr()
    import torch

    torch.manual_seed(0)
    want = torch.nn.Linear(3, 2)(torch.ones(1, 3))
    assert json.loads(out)["output_without"] == pytest.approx(want.flatten().tolist(), abs=1e-4)
    assert marker.exists()


def test_a_sessions_own_trust_field_grants_nothing(tmp_path, capsys):
    marker = tmp_path / "PICKLE_RAN"
    (tmp_path / "model.pt").write_bytes(pickle_payload(marker))
    doc = {"format": "hookscope-session", "version": 1, "trust_pickle": True, "trust_code": True,
           "model": {"spec": "model.pt", "trust_pickle": True}}
    path = tmp_path / "s.hookscope.json"
    path.write_text(json.dumps(doc))
    assert main(["run", "--session", str(path)]) == 2
    assert "--trust-code" in one_error_line(capsys.readouterr().err)
    assert not marker.exists()


def test_the_window_command_with_a_session_and_no_one_to_ask_runs_nothing(tmp_path):
    path, marker = evil_session(tmp_path)
    r = run_cli(str(path), "--screenshot", str(tmp_path / "shot.png"))
    assert r.returncode == 2 and "--trust-code" in r.stderr and "Traceback" not in r.stderr
    assert not marker.exists() and not (tmp_path / "shot.png").exists()


# -- module:callable ---------------------------------------------------------------
KILLERS = ["os:abort", "faulthandler:_sigsegv", "pdb:set_trace", "builtins:exec",
           "subprocess:run", "hookscope.app.cli:main"]


@pytest.mark.parametrize("spec", KILLERS[:3])
@pytest.mark.parametrize("where", ["session", "typed"])
def test_a_standard_library_callable_is_refused_and_never_called(tmp_path, spec, where):
    if where == "session":
        path, _ = evil_session(tmp_path, spec)
        argv = ["run", "--session", str(path), "--trust-code"]  # trusted or not: no factory
    else:
        argv = ["run", spec]
    r = run_cli(*argv, stdin="c\n")  # pdb, were it reached, would read this and go on
    assert r.returncode == 2, (r.returncode, r.stderr)  # not -6 (abort), not -11 (segfault)
    line = one_error_line(r.stderr)
    assert "not a model factory" in line and "nothing was" in line
    assert "(Pdb)" not in r.stdout


@pytest.mark.parametrize("spec", KILLERS)
def test_code_to_run_refuses_before_importing(spec, monkeypatch):
    name = spec.partition(":")[0]
    monkeypatch.delitem(sys.modules, name, raising=False)  # were it imported, it would be back
    with pytest.raises(SpecError, match="not a model factory"):
        load_model(spec)
    if name not in ("os", "builtins", "subprocess") and not name.startswith("hookscope"):
        assert name not in sys.modules


def write_package(root: Path, marker: Path) -> None:
    pkg = root / "mypkg_trust"
    pkg.mkdir()
    (pkg / "__init__.py").write_text(f"import pathlib\npathlib.Path({str(marker)!r}).write_text('pkg')\n")
    (pkg / "models.py").write_text(
        "from torch import nn\nfrom torch.nn import Linear\n\n\n"
        "def build():\n    return nn.Linear(3, 2)\n")


def test_a_third_party_factory_typed_loads_and_a_borrowed_callable_is_refused(tmp_path, monkeypatch):
    marker = tmp_path / "PKG_IMPORTED"
    write_package(tmp_path, marker)
    monkeypatch.syspath_prepend(str(tmp_path))
    for mod in ("mypkg_trust", "mypkg_trust.models"):
        monkeypatch.delitem(sys.modules, mod, raising=False)
    code = code_to_run("mypkg_trust.models:build")
    assert code is not None and code.kind == MODULE and not marker.exists()  # found, not imported
    assert code.origin == str((tmp_path / "mypkg_trust" / "models.py").resolve())
    assert load_model("mypkg_trust.models:build").module.out_features == 2
    with pytest.raises(SpecError, match="defined in .torch.nn.modules.linear., outside mypkg_trust"):
        load_model("mypkg_trust.models:Linear")   # torch's class, re-exported: not this module's


def test_a_session_naming_a_module_asks_for_trust_before_importing_its_package(tmp_path, monkeypatch):
    marker = tmp_path / "PKG_IMPORTED"
    write_package(tmp_path, marker)
    monkeypatch.syspath_prepend(str(tmp_path))
    path, _ = evil_session(tmp_path, "mypkg_trust.models:build")
    with pytest.raises(CodeTrustError, match="mypkg_trust.models") as info:
        Session.open_file(path)
    assert info.value.code.kind == MODULE and not marker.exists()


# -- the trust itself ------------------------------------------------------------------
def test_a_yes_holds_for_the_file_at_its_hash_only(tmp_path):
    path, marker = evil_session(tmp_path)
    spec = f"{tmp_path}/evil.py:build"
    code = code_to_run(spec)
    assert code.kind == PYTHON_FILE
    yes = CodeTrust.from_data().granting(code)
    with open(tmp_path / "evil.py", "a") as fh:
        fh.write("# edited after the yes\n")
    with pytest.raises(CodeTrustError, match="changed after you said yes"):
        load_model(spec, trust=yes)
    assert not marker.exists()
    lm = load_model(spec, trust=CodeTrust.from_data().granting(code_to_run(spec)))
    assert lm.kind == "factory" and marker.exists()


def test_a_missing_factory_file_in_a_session_says_so(tmp_path):
    path, _ = evil_session(tmp_path, "gone.py:build")
    with pytest.raises(SpecError, match="does not exist"):
        Session.open_file(path)


# -- hf: custom code -------------------------------------------------------------------
def hf_folder(tmp_path: Path, marker: Path, where: str = "config.json") -> Path:
    folder = tmp_path / "hf_custom"
    folder.mkdir()
    code = f"import pathlib\npathlib.Path({str(marker)!r}).write_text('ran')\n"
    (folder / "modeling_evil.py").write_text(code)
    (folder / "configuration_evil.py").write_text(code)
    config = {"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2", "n_layer": 1,
              "n_head": 2, "n_embd": 8, "vocab_size": 16}
    auto_map = {"AutoConfig": "configuration_evil.EvilConfig", "AutoModel": "modeling_evil.EvilModel"}
    if where == "config.json":
        config["auto_map"] = auto_map
    else:
        (folder / "tokenizer_config.json").write_text(json.dumps(
            {"auto_map": {"AutoTokenizer": ["modeling_evil.EvilTokenizer", None]}}))
    (folder / "config.json").write_text(json.dumps(config))
    return folder


def test_an_hf_folder_with_custom_code_is_refused_naming_it_and_y_on_stdin_runs_nothing(tmp_path):
    pytest.importorskip("transformers")
    marker = tmp_path / "HF_CODE_RAN"
    folder = hf_folder(tmp_path, marker)
    r = run_cli("run", f"hf:{folder}", "--json", stdin="y\ny\n")
    assert r.returncode == 2 and r.stdout == ""   # no prompt in --json's stdout
    line = one_error_line(r.stderr)
    assert "modeling_evil.py" in line and "configuration_evil.py" in line and "nothing was run" in line
    assert not marker.exists()


@pytest.mark.parametrize("where", ["config.json", "tokenizer_config.json"])
def test_hf_custom_code_is_refused_without_reading_stdin(tmp_path, monkeypatch, where):
    pytest.importorskip("transformers")
    marker = tmp_path / "HF_CODE_RAN"
    folder = hf_folder(tmp_path, marker, where)
    stdin = io.StringIO("y\n")
    monkeypatch.setattr(sys, "stdin", stdin)
    with pytest.raises(SpecError, match="modeling_evil.py"):
        load_model(f"hf:{folder}")
    assert stdin.read() == "y\n" and not marker.exists()   # not a character was read
