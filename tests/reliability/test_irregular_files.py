"""Files that are not files: a FIFO, a folder, or a symlink to /dev/zero or /dev/urandom
under a name Hookscope reads (a session, an input, labels, weights, a .pt2).

Opening a FIFO blocks until a writer comes (forever); /dev/zero has ``st_size`` 0 and
endless data, so a size check on the path passes and the read never ends. Each must
be refused at once, in one line that says what the name is. Every CLI case runs in
ONE subprocess with a time limit and a memory limit, so a regression fails here
instead of hanging CI or eating the machine's memory.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).parent
KINDS = {"fifo": "FIFO", "folder": "a folder", "devzero": "character device",
         "urandom": "character device"}


def make_irregular(path: Path, kind: str) -> Path:
    """``path`` made as a ``kind`` of non-regular file (see :data:`KINDS`)."""
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "folder":
        path.mkdir()
    else:
        path.symlink_to("/dev/zero" if kind == "devzero" else "/dev/urandom")
    return path


# name -> (argv for `hookscope run` with {P} the hostile path, file suffix)
CASES = {
    "session": (["--session", "{P}"], ".hookscope.json"),
    "npy input": (["demo:clamp", "--input", "{P}"], ".npy"),
    "pt input": (["demo:clamp", "--input", "{P}"], ".pt"),
    "safetensors input": (["demo:clamp", "--input", "{P}"], ".safetensors"),
    "image input": (["demo:cnn", "--input", "{P}"], ".png"),
    "labels": (["demo:clamp", "--labels", "{P}"], ".txt"),
    "weights": (["faulty_models:non_finite", "--weights", "{P}"], ".pt"),
    "safetensors weights": (["faulty_models:non_finite", "--weights", "{P}"], ".safetensors"),
}

_CHILD = r"""
import contextlib, io, json, resource, sys
from hookscope.app.cli import main
import torch  # imported before the memory limit, which then bounds what a read may take
soft = int(sys.argv[2])
resource.setrlimit(resource.RLIMIT_AS, (soft, resource.getrlimit(resource.RLIMIT_AS)[1]))
out = {}
for name, argv in json.loads(sys.argv[1]).items():
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            rc = main(["run", *argv])
        except BaseException as exc:  # a traceback is a failure the test reports
            rc = repr(exc)
    out[name] = [rc, err.getvalue()]
print(json.dumps(out))
"""


def _address_space_now() -> int:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmPeak"))


@pytest.fixture(scope="module")
def cli_results(tmp_path_factory):
    """``{(case, kind): (status, stderr)}`` from one subprocess running every case."""
    folder = tmp_path_factory.mktemp("irregular")
    argvs = {}
    for case, (argv, suffix) in CASES.items():
        for kind in KINDS:
            path = make_irregular(folder / f"{case.replace(' ', '_')}_{kind}{suffix}", kind)
            argvs[f"{case}|{kind}"] = [a.replace("{P}", str(path)) for a in argv]
    limit = _address_space_now() + (6 << 30)  # torch's own mappings, plus room to run
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, "-c", _CHILD, json.dumps(argvs), str(limit)],
                          capture_output=True, text=True, timeout=120, env=env, cwd=folder)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return {tuple(k.split("|")): v for k, v in json.loads(proc.stdout.splitlines()[-1]).items()}


@pytest.mark.timeout(300)
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("case", CASES)
def test_a_name_that_is_not_a_regular_file_is_refused_in_one_line(cli_results, case, kind):
    rc, err = cli_results[(case, kind)]
    assert rc == 2, err
    assert err.count("\n") == 1 and err.startswith("hookscope: error: "), err
    assert KINDS[kind] in err and "not a regular file" in err, err


@pytest.mark.timeout(60)
@pytest.mark.parametrize("kind", ["fifo", "devzero"])
def test_the_core_readers_refuse_without_blocking(tmp_path, kind):
    from hookscope.core import InputError
    from hookscope.core.model.class_labels import read_labels
    from hookscope.core.model.inputs import parse_input
    from hookscope.core.session.session_file import SessionFileError, read_session_file

    with pytest.raises(SessionFileError, match="not a regular file"):
        read_session_file(make_irregular(tmp_path / "s.hookscope.json", kind))
    with pytest.raises(InputError, match="not a regular file"):
        read_labels(make_irregular(tmp_path / "labels.txt", kind))
    with pytest.raises(InputError, match="not a regular file"):
        parse_input(str(make_irregular(tmp_path / "x.npy", kind)))


def test_a_file_that_grows_past_the_limit_is_not_read_past_it(tmp_path):
    from hookscope.core.base.errors import InputError
    from hookscope.core.base.regular_file import read_regular

    path = tmp_path / "big.txt"
    path.write_bytes(b"x" * 2000)
    with pytest.raises(InputError, match="above the 1,000 bytes"):
        read_regular(path, 1000, "labels file")
    assert read_regular(path, 2000) == b"x" * 2000


@pytest.mark.timeout(90)
def test_the_window_opens_with_a_fifo_session_in_its_banner(make_window, qtbot, tmp_path):
    fifo = make_irregular(tmp_path / "pipe.hookscope.json", "fifo")
    win = make_window([str(fifo)])  # read on the GUI thread: it must not block
    qtbot.waitUntil(lambda: win.last_result is not None and win.is_idle(), timeout=30_000)
    assert "FIFO" in win.error_text() and "could not open the session" in win.error_text()
    assert win.loaded.spec == "demo:clamp"  # the default model instead, usable



@pytest.mark.timeout(60)
@pytest.mark.parametrize("kind", ["fifo", "devzero"])
def test_an_hf_folder_holding_a_non_regular_file_is_refused(tmp_path, kind):
    tf = pytest.importorskip("transformers")
    from hookscope.core import SpecError, load_model

    folder = tmp_path / "gpt"
    tf.GPT2Model(tf.GPT2Config(n_layer=1, n_embd=8, n_head=2, vocab_size=50,
                               n_positions=16, bos_token_id=0,
                               eos_token_id=0)).save_pretrained(folder)
    make_irregular(folder / "tokenizer.json", kind)  # transformers would open it by name
    with pytest.raises(SpecError, match=f"holds 'tokenizer.json', which is .*{KINDS[kind]}"):
        load_model(f"hf:{folder}")


@pytest.mark.timeout(90)
def test_the_window_says_what_a_fifo_labels_file_is(make_window, qtbot, tmp_path):
    fifo = make_irregular(tmp_path / "classes.txt", "fifo")
    win = make_window(["demo:clamp", "--labels", str(fifo)])
    qtbot.waitUntil(lambda: "FIFO" in win.error_text() and win.is_idle(), timeout=30_000)
    assert "labels file" in win.error_text()
