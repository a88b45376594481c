"""`hookscope run`: JSON and table output, and one-line errors with status 2."""

import json
import subprocess
import sys

import numpy as np
import pytest
import torch

from hookscope.app.cli import main
from hookscope.core import modify_hook_test


def run_cli(capsys, *argv):
    code = main(["run", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_exercise_one_json(capsys):
    code, out, err = run_cli(capsys, "demo:clamp", "--capture", "0", "--clamp", "0=-0.5:0.5", "--json")
    assert code == 0 and err == ""
    data = json.loads(out)
    ref = modify_hook_test()
    assert [round(v, 4) for v in data["output_without"]] == ref["output_without"]
    assert [round(v, 4) for v in data["output_with"]] == ref["output_with"]
    assert data["outputs_differ"] is ref["outputs_differ"]
    assert data["device"] == "cpu" and {"baseline", "intervened"} <= set(data["timings_ms"])
    cap = data["captures"]["0"]
    assert len(cap) == 1 and cap[0]["shape"] == [1, 4]
    assert -0.5 <= cap[0]["min"] <= cap[0]["max"] <= 0.5
    assert data["max_abs_diff"] == pytest.approx(
        max(abs(a - b) for a, b in zip(data["output_without"], data["output_with"])))


def test_table_output(capsys):
    code, out, _ = run_cli(capsys, "demo:cnn", "--capture", "conv1,fc", "--clamp", "conv1=-0.2:0.2")
    assert code == 0
    assert "outputs differ  yes" in out and "conv1" in out and "% clamped" in out


def test_stats_only_flag(capsys):
    code, out, _ = run_cli(capsys, "demo:features", "--capture", "fc1", "--stats-only", "--json")
    assert code == 0 and json.loads(out)["captures"]["fc1"][0]["shape"] == [1, 8]


@pytest.fixture
def bad_model_files(tmp_path):
    (tmp_path / "syntax.py").write_text("def make(:\n")
    (tmp_path / "raises.py").write_text("def make():\n    raise RuntimeError('factory exploded')\n")
    return tmp_path


@pytest.mark.parametrize("argv, match", [
    (["missing.py:make"], "does not exist"),
    (["{d}/syntax.py:make"], "syntax error in syntax.py line 1"),
    (["{d}/raises.py:make"], "factory exploded"),
    (["demo:clamp", "--input", "[[1.0, 2.0]]"], "forward failed"),
    (["demo:clamp", "--capture", "fc9"], "unknown layer 'fc9'"),
    (["demo:clamp", "--clamp", "0=1:-1"], "lo must be <= hi"),
    (["demo:clamp", "--clamp", "0=a:b"], "must be numbers"),
    (["demo:clamp", "--input", "[[1,"], "not a valid literal"),
])
def test_user_errors_exit_2_with_one_line(capsys, bad_model_files, argv, match):
    code, out, err = run_cli(capsys, *[a.format(d=bad_model_files) for a in argv])
    assert code == 2 and out == ""
    assert err.startswith("hookscope: error: ") and err.count("\n") == 1
    assert "Traceback" not in err
    import re
    assert re.search(match, err), err


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
def test_cuda_absent_exits_2(capsys):
    code, _, err = run_cli(capsys, "demo:clamp", "--device", "cuda")
    assert code == 2 and "CUDA" in err and "--device cpu" in err


def test_console_script_end_to_end():
    # Through a real process: no traceback, status 2, Qt never imported.
    r = subprocess.run([sys.executable, "-m", "hookscope.app.cli", "run", "demo:nope"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "unknown demo" in r.stderr and "Traceback" not in r.stderr


def test_help_explains_trust_flag(capsys):
    with pytest.raises(SystemExit):
        main(["run", "--help"])
    out = capsys.readouterr().out
    assert "--trust-pickle" in out and "runs code" in out.replace("\n", " ").replace("  ", " ")


def test_cli_writes_all_three(tmp_path, capsys):
    code = main(["run", "demo:clamp", "--capture", "0", "--clamp", "0=-0.5:0.5",
                 "--save-captures", str(tmp_path / "c.npz"), "--save-json", str(tmp_path / "s.json"),
                 "--export-script", str(tmp_path / "x.py")])
    assert code == 0
    assert set(np.load(tmp_path / "c.npz")) == {"0#0", "0#0:before"}
    assert json.loads((tmp_path / "s.json").read_text())["outputs_differ"] is True
    assert "make_clamp_hook" in (tmp_path / "x.py").read_text()
    code = main(["run", "demo:clamp", "--capture", "0", "--save-captures", str(tmp_path / "c.txt")])
    assert code == 2 and ".npz or .safetensors" in capsys.readouterr().err


def test_open_clamp_bound(capsys):
    code = main(["run", "demo:clamp", "--capture", "0", "--clamp", "0=:0.5", "--json"])
    data = json.loads(capsys.readouterr().out)
    assert code == 0 and data["captures"]["0"][0]["max"] <= 0.5


def test_bad_output_paths_refused_before_the_run(capsys, tmp_path):
    for flag, value in (("--save-captures", str(tmp_path / "c.txt")),
                        ("--save-json", str(tmp_path / "missing" / "s.json"))):
        code = main(["run", "demo:clamp", "--capture", "0", flag, value])
        out, err = capsys.readouterr()
        assert code == 2 and out == "" and "hookscope: error:" in err


def test_session_file_runs_with_the_numbers_it_was_saved_with(capsys, tmp_path):
    f = tmp_path / "s.hookscope.json"
    code, first, _ = run_cli(capsys, "demo:clamp", "--capture", "0", "--clamp", "0=-0.5:0.5",
                             "--json", "--save-session", str(f))
    assert code == 0 and f.is_file()
    code, again, err = run_cli(capsys, "--session", str(f), "--json")
    assert code == 0 and err == ""
    a, b = json.loads(first), json.loads(again)
    assert a["output_with"] == b["output_with"] and a["output_without"] == b["output_without"]
    ref = modify_hook_test()
    assert [round(v, 4) for v in b["output_with"]] == ref["output_with"]
    code, _, err = run_cli(capsys, "--session", str(f), "--capture", "1")
    assert code == 2 and "drop --capture" in err and "Traceback" not in err
    (tmp_path / "junk.json").write_text("[1, 2")
    code, out, err = run_cli(capsys, "--session", str(tmp_path / "junk.json"))
    assert code == 2 and out == "" and "broken JSON" in err and len(err.strip().splitlines()) == 1
    code, _, err = run_cli(capsys)
    assert code == 2 and "--session FILE" in err
