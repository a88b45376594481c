"""Cases that need a process of their own: a full disk, and scripts Hookscope writes.

A full disk is simulated with a file-size limit (``RLIMIT_FSIZE``) in a
subprocess; SIGXFSZ is ignored there so a write past the limit fails with
EFBIG, as a write to a full disk fails with ENOSPC.
"""

from __future__ import annotations

import json
import math
import runpy
import subprocess
import sys

import pytest

import faulty_models as fm

resource = pytest.importorskip("resource")  # POSIX only

# One subprocess runs every full-disk case (importing torch is the slow part).
_RUN_LIMITED = """
import contextlib, io, json, resource, signal, sys
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (600, 600))
from hookscope.app.cli import main
results = []
for argv in json.loads(sys.argv[1]):
    err, out = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
        rc = main(argv)
    results.append([rc, err.getvalue()])
print(json.dumps(results))
"""
FLAGS = [("--save-captures", "c.npz"), ("--save-captures", "c.safetensors"),
         ("--save-json", "s.json"), ("--export-script", "s.py")]


def test_full_disk_leaves_no_partial_file_and_keeps_the_old_one(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    old = tmp_path / "old.json"
    old.write_text('{"kept": true}')
    cases = [["run", "demo:cnn", "--capture", "conv1,conv2", "--json", flag, str(out / name)]
             for flag, name in FLAGS]
    cases.append(["run", "demo:cnn", "--capture", "conv1", "--save-json", str(old)])
    proc = subprocess.run([sys.executable, "-c", _RUN_LIMITED, json.dumps(cases)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    results = json.loads(proc.stdout)
    targets = [out / name for _, name in FLAGS] + [old]
    for (rc, err), target in zip(results, targets):
        assert rc == 2, err
        assert err.count("\n") == 1 and "Traceback" not in err
        assert f"cannot write {target}: " in err and "File too large" in err
        assert err.rstrip().endswith("nothing was written")
    assert sorted(p.name for p in out.iterdir()) == []  # no partial file, no temporary file
    assert json.loads(old.read_text()) == {"kept": True}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["old.json", "out"]


def test_exported_script_with_an_open_bound_runs_and_matches(tmp_path, capsys):
    from hookscope.core import Plan, compare, load_model, parse_input
    from hookscope.core.engine.output_diff import flat_floats

    script = tmp_path / "repro.py"
    from hookscope.app.cli import main

    assert main(["run", "demo:clamp", "--clamp", "0=:0.2", "--export-script", str(script)]) == 0
    capsys.readouterr()
    runpy.run_path(str(script), run_name="__main__")  # in-process: as `python repro.py`, faster
    got = json.loads(capsys.readouterr().out)
    lm = load_model("demo:clamp")
    ref = compare(lm.module, parse_input("", lm.example_input),
                  Plan(clamp={"0": (-math.inf, 0.2)}), "cpu")
    assert got["output_with"] == pytest.approx(flat_floats(ref.output_with), abs=1e-6)
    assert got["outputs_differ"] == ref.outputs_differ


def test_non_finite_values_are_counted_and_json_stays_json(capsys):
    from hookscope.app.cli import main

    assert main(["run", "faulty_models:non_finite", "--capture", "0", "--json"]) == 0
    text = capsys.readouterr().out
    strict = json.loads(text, parse_constant=lambda c: pytest.fail(f"non-JSON constant {c}"))
    stats = strict["captures"]["0"][0]
    assert (stats["nan_count"], stats["inf_count"]) == (1, 1)
    assert stats["min"] == stats["max"] == 3.0  # over the finite values
    assert strict["output_without"][:2] == [None, None]
    assert main(["run", "faulty_models:non_finite", "--capture", "0"]) == 0
    row = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("0 ")][0]
    assert row.endswith("1 NaN, 1 Inf")


def test_identical_outputs_with_nan_and_inf_do_not_differ():
    from hookscope.core import Plan, compare

    module, x = fm.non_finite()
    r = compare(module, x, Plan(capture=("0",)), "cpu")
    assert (r.outputs_differ, r.max_abs_diff) == (False, 0.0)
    r = compare(module, x, Plan(clamp={"0": (0.0, 1.0)}), "cpu")  # inf -> 1 and 3 -> 1
    assert r.outputs_differ and math.isinf(r.max_abs_diff)
