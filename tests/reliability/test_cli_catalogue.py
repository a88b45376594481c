"""The CLI catalogue: every mistake a person can make gives one clear line, status 2, nothing lost.

Each row is ``(kind, argv, status, says)``: ``hookscope run ARGV`` must exit
with ``status``, print exactly one line on stderr that contains ``says`` (no
traceback, no raw control characters), leave no file in the output folder,
run no code from a hostile file, and leave no hook on a model it ran. ``@name``
in ``argv`` is a file from catalogue_files.build, ``@out/...`` a path in the
output folder, ``@ro/...`` one in a folder that cannot be written.

Rows run in-process through ``main(argv)`` (fast); the full-disk rows need a
file-size limit and so run in a subprocess (test_full_disk.py).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from hookscope.app.cli import main

import catalogue_files
import faulty_models as fm

LONG = "m" * 5000
CASES = [
    # kind, argv, status, says
    ("size", ["demo:clamp", "--input", "random:100000x100000"], 2, "37.3 GiB, above the input memory budget of 4.0 GiB"),
    ("size", ["demo:clamp", "--input", "@huge.npy"], 2, "37.3 GiB, above the input memory budget"),
    ("size", ["demo:cnn", "--input", "@giant.png"], 2, "400000000 pixels"),
    ("size", ["demo:clamp", "--input", "random:1x100000", "--max-input-bytes", "1K"], 2, "above the input memory budget of 1.0 KiB"),
    ("size", ["demo:clamp", "--max-input-bytes", "lots"], 2, "is not a size"),
    ("size", ["demo:clamp", "--input", "@big_input.pt", "--max-input-bytes", "100K"], 2, "KiB, above the input memory budget of 100.0 KiB"),
    ("size", ["demo:clamp", "--input", "random:2x2:dtype=int:high=99999999999999999999"], 2, "cannot make random input"),
    ("text", ["demo:clamp", "--input"], 2, "argument --input: expected one argument (see hookscope run --help)"),
    ("text", ["demo:clamp", "--no-such-flag"], 2, "unrecognized arguments: --no-such-flag"),
    ("text", [], 2, "no model given: name a model spec"),
    ("text", [LONG + ".py:make"], 2, "(5003 characters)"),
    ("text", [LONG + ".pt2"], 2, "does not exist"),
    ("text", ["demo:clamp", "--input", LONG + ".npy"], 2, "(5004 characters)"),
    ("text", ["demo:clamp", "--input=" + "-" * 5000 + "1"], 2, "nested too deeply"),
    ("text", ["demo:clamp", "--input=" + "+" * 100000 + "1"], 2, "nested too deeply"),
    ("text", ["demo:clamp", "--input", "[" * 3000 + "]" * 3000], 2, "not a valid literal"),
    ("text", ["demo:x\n\x1b[2Jy"], 2, "unknown demo 'x\\n\\x1b[2Jy'"),
    ("text", ["bad\x00name.pt2"], 2, "does not exist"),
    ("text", ["~no_such_user_here/model.pt2"], 2, "does not exist"),
    ("text", ["demo:clamp", "--input", "[1,\u2028\n2]\x07"], 2, "[1,\\u2028\\n2]\\x07"),
    ("text", ["demo:clamp", "--capture", "0\r\n1"], 2, "0\\r\\n1"),
    ("file", ["demo:clamp", "--input", "@truncated.npy"], 2, "truncated: its header promises 80000 bytes"),
    ("file", ["demo:clamp", "--input", "@garbage.npy"], 2, "not a valid .npy file"),
    ("file", ["demo:clamp", "--input", "@objects.npy"], 2, "holds Python objects"),
    ("file", ["demo:cnn", "--input", "@truncated.png"], 2, "(or it is damaged)"),
    ("file", ["@truncated.pt2"], 2, "not a zip archive"),
    ("file", ["@text.pt2"], 2, "not a zip archive"),
    ("file", ["@truncated.pt2", "--trust-pickle"], 2, "cannot load truncated.pt2"),
    ("file", ["faulty_models:non_finite", "--weights", "@broken.safetensors"], 2, "as safetensors"),
    ("hostile", ["demo:cnn", "--input", "@postscript.png"], 2, "not a PNG, JPEG, BMP, GIF, WebP or TIFF"),
    ("hostile", ["demo:clamp", "--input", "@evil_input.pt"], 2, "weights_only"),
    ("hostile", ["faulty_models:non_finite", "--weights", "@evil_weights.pt"], 2, "weights_only"),
    ("hostile", ["@model.pt"], 2, "--trust-code"),
    ("hostile", ["@hostile pickled weight"], 2, "as a Python pickle"),
    ("hostile", ["@hostile pickled example inputs"], 2, "example inputs as Python objects"),
    ("hostile", ["@hostile opaque-object constant"], 2, "--trust-code"),
    ("hostile", ["@native.pt2"], 2, "native code"),
    ("forward", ["faulty_models:raises_base_exception", "--capture", "0.inner", "--clamp", "1=0:1"], 2, "raised Abort: model gave up"),
    ("forward", ["faulty_models:raises_keyboard_interrupt", "--capture", "0.inner", "--clamp", "1=0:1"], 130, "hookscope: interrupted"),
    ("forward", ["faulty_models:calls_sys_exit", "--capture", "0.inner", "--clamp", "1=0:1"], 2, "called sys.exit(3)"),
    ("forward", ["faulty_models:raises_memory_error", "--capture", "0.inner"], 2, "MemoryError"),
    ("import", ["@exits_at_import.py:make"], 2, "called sys.exit('no model here')"),
    ("write", ["demo:features", "--capture", "fc1", "--save-captures", "@ro/c.npz"], 2, "cannot write"),
    ("write", ["demo:features", "--capture", "fc1", "--save-json", "@ro/s.json"], 2, "cannot write"),
    ("write", ["demo:features", "--export-script", "@ro/s.py"], 2, "cannot write"),
    ("write", ["demo:features", "--capture", "fc1", "--save-captures", "@a_file/c.npz"], 2, "does not exist"),
    ("write", ["demo:features", "--capture", "fc1", "--save-captures", "@out/c.txt"], 2, "use a .npz or .safetensors"),
    ("write", ["demo:features", "--save-captures", "@out/c.npz"], 2, "no captured tensors"),
]


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    return catalogue_files.build(tmp_path_factory.mktemp("catalogue"))


@pytest.fixture
def unwritable(tmp_path):
    """A folder this process cannot write into."""
    ro = catalogue_files.unwritable_folder(tmp_path)
    if ro is None:
        pytest.skip("no unwritable folder on this machine")
    yield ro
    (tmp_path / "ro").chmod(0o755)


def _argv(argv, files, out, ro):
    def one(a):
        if not a.startswith("@"):
            return a
        key = a[1:]
        if key.startswith("out/"):
            return str(out / key[4:])
        if key.startswith("ro/"):
            return str(ro / key[3:])
        head, _, rest = key.partition("/")
        if rest:
            return str(files[head] / rest)
        name, colon, func = key.partition(":")
        return str(files[name]) + colon + func
    return [one(a) for a in argv]


def _listing(folder: Path) -> set[str]:
    return {p.name for p in folder.iterdir()} if folder.is_dir() else set()


@pytest.mark.parametrize("kind,argv,status,says", CASES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_catalogue_case(kind, argv, status, says, files, unwritable, tmp_path, capsys, monkeypatch):
    out = tmp_path / "out"
    out.mkdir()
    monkeypatch.setattr(sys, "argv", ["hookscope", "run", "--some-flag-a-model-must-not-see"])
    before_ro = _listing(unwritable)
    made_before = len(fm.MADE)

    rc = main(["run", *_argv(argv, files, out, unwritable)])

    captured = capsys.readouterr()
    err = captured.err
    assert rc == status, err
    assert err.count("\n") == 1 and err.endswith("\n"), err
    line = err[:-1]
    assert line.startswith("hookscope: "), line
    assert says in line, line
    assert "Traceback" not in err
    assert line.isprintable(), repr(line)  # control characters arrive escaped
    assert len(line) < 2100
    assert _listing(out) == set(), "a partial or unwanted file was left"
    assert _listing(unwritable) == before_ro
    assert not files["MARKER"].exists(), "code from a hostile file ran"
    for module in fm.MADE[made_before:]:
        assert fm.hooks_left(module) == 0, "a hook outlived the failed run"
    assert sys.argv == ["hookscope", "run", "--some-flag-a-model-must-not-see"]


def test_a_model_file_that_parses_argv_at_import_sees_a_clean_command_line(files, capsys, monkeypatch):
    monkeypatch.setattr(sys, "argv", ["hookscope", "run", "--capture", "x"])
    assert main(["run", f"{files['argv_at_import.py']}:make"]) == 0
    assert capsys.readouterr().err == ""
    assert sys.argv == ["hookscope", "run", "--capture", "x"]


def test_budget_from_the_environment(monkeypatch, capsys):
    monkeypatch.setenv("HOOKSCOPE_MAX_INPUT_BYTES", "2K")
    assert main(["run", "demo:clamp", "--input", "random:1x1000"]) == 2
    assert "above the input memory budget of 2.0 KiB" in capsys.readouterr().err
    monkeypatch.setenv("HOOKSCOPE_MAX_INPUT_BYTES", "1M")
    assert main(["run", "demo:clamp", "--input", "random:1x3"]) == 0


def test_flag_budget_lasts_one_command(capsys):
    assert main(["run", "demo:clamp", "--input", "random:1x3", "--max-input-bytes", "1M"]) == 0
    from hookscope.core.model.budget import DEFAULT_MAX_INPUT_BYTES, max_input_bytes

    assert max_input_bytes() == DEFAULT_MAX_INPUT_BYTES

