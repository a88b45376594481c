"""`hookscope run`: JSON and table output, and one-line errors with status 2."""

import json
import subprocess
import sys

import numpy as np
import pytest
import torch

from hookscope.app.cli import main
from hookscope.core import load_model, modify_hook_test


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
    assert "outputs differ  yes" in out and "conv1" in out and "% changed" in out
    assert "verdict         The intervention" in out and "without" in out


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
    (["demo:clamp", "--intervene", "0=scale"], r"write scale:FACTOR"),
    (["demo:clamp", "--intervene", "0=scale:big"], r"FACTOR must be a number.*scale:FACTOR"),
    (["demo:clamp", "--intervene", "0"], r"LAYER=KIND\[:ARGS\]"),
    (["demo:clamp", "--intervene", "0=blur:2"], "unknown intervention kind 'blur'; the kinds are"),
    (["demo:clamp", "--intervene", "0=patch"], "--source-input X"),
    (["demo:clamp", "--intervene", "0=zero", "--clamp", "0=0:1"], "already has an intervention"),
    (["demo:clamp", "--intervene", "0=patch:[[1.0, 2.0, 3.0], [1.0, 2.0, 3.0]]"], "same shape"),
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
    assert "--trust-code" in out and "--trust-pickle" in out and "runs code" in out.replace("\n", " ").replace("  ", " ")


def test_cli_writes_all_three(tmp_path, capsys):
    code = main(["run", "demo:clamp", "--capture", "0", "--clamp", "0=-0.5:0.5",
                 "--save-captures", str(tmp_path / "c.npz"), "--save-json", str(tmp_path / "s.json"),
                 "--export-script", str(tmp_path / "x.py")])
    assert code == 0
    saved = np.load(tmp_path / "c.npz")
    assert set(saved) == {"0#0", "0#0:before", "0#0:baseline"}
    # the baseline run's value of layer 0, by hand: the model without any hook
    lm = load_model("demo:clamp")
    with torch.no_grad():
        np.testing.assert_array_equal(saved["0#0:baseline"], lm.module[0](lm.example_input).numpy())
    np.testing.assert_array_equal(saved["0#0"], np.clip(saved["0#0:baseline"], -0.5, 0.5))
    assert json.loads((tmp_path / "s.json").read_text())["outputs_differ"] is True
    assert "def clamp_leaf" in (tmp_path / "x.py").read_text()
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


def test_intervene_kinds_from_the_command_line(capsys):
    from hookscope.core import MeanAblate, Noise, Patch, Plan, Scale, Zero, compare, load_model

    lm = load_model("demo:cnn")
    src = "random:1x1x8x8:seed=4"
    argv = ["demo:cnn", "--capture", "conv2,fc", "--intervene", "conv1=zero:0,3",
            "--intervene", "bn1=scale:0.5", "--intervene", "conv2=patch", "--source-input", src,
            "--intervene", "relu2=noise:0.2:9", "--intervene", "pool1=mean", "--json"]
    code, out, err = run_cli(capsys, *argv)
    assert code == 0, err
    data = json.loads(out)
    plan = Plan(capture=["conv2", "fc"], interventions={
        "conv1": Zero(units=(0, 3)), "bn1": Scale(0.5), "conv2": Patch(src),
        "relu2": Noise(0.2, 9), "pool1": MeanAblate()})
    r = compare(lm.module, lm.example_input, plan)
    np.testing.assert_allclose(data["output_with"], r.output_with.flatten().tolist(), rtol=1e-6)
    conv2 = data["captures"]["conv2"][0]
    assert conv2["intervention"].startswith("patch") and conv2["fraction_changed"] == 1.0
    assert conv2["baseline"]["mean"] == pytest.approx(r.captures["conv2"][0].baseline_stats.mean)
    assert data["interventions"]["conv1"] == {"kind": "zero", "units": [0, 3], "dim": None}
    assert data["verdict"].startswith("The interventions")


def test_clamp_shorthand_equals_intervene_clamp(capsys):
    _, a, _ = run_cli(capsys, "demo:clamp", "--capture", "0", "--clamp", "0=-0.5:", "--json")
    _, b, _ = run_cli(capsys, "demo:clamp", "--capture", "0", "--intervene", "0=clamp:-0.5:", "--json")
    da, db = json.loads(a), json.loads(b)
    assert da["output_with"] == db["output_with"] and da["captures"] == db["captures"]
    assert da["captures"]["0"][0]["fraction_clamped"] == da["captures"]["0"][0]["fraction_changed"]


def test_reference_input_for_mean(capsys):
    code, out, err = run_cli(capsys, "demo:features", "--intervene", "fc1=mean",
                             "--reference-input", "[[0.0, 1.0, 0.0, 1.0], [2.0, 2.0, 2.0, 2.0]]",
                             "--json")
    assert code == 0, err
    from hookscope.core import load_model

    lm = load_model("demo:features")
    ref = torch.tensor([[0.0, 1.0, 0.0, 1.0], [2.0, 2.0, 2.0, 2.0]])
    with torch.inference_mode():
        mean = lm.module.fc1(ref).mean(0, keepdim=True)
        h = lm.module.fc1.register_forward_hook(lambda m, i, o: mean.expand_as(o))
        want = lm.module(lm.example_input)
        h.remove()
    np.testing.assert_allclose(json.loads(out)["output_with"], want.flatten().tolist(), rtol=1e-6)


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


def test_zeros_print_unsigned_and_the_overhead_is_never_negative(capsys):
    # scale(0) makes conv1's output all zeros, some of them -0.0 in torch: the table
    # says 0, not -0; --json's overhead floors at 0 (a negative cost is timing noise).
    assert main(["run", "demo:cnn", "--capture", "conv1", "--intervene", "conv1=scale:0"]) == 0
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if line.startswith("conv1"))
    cells = row.split()
    assert cells[4:8] == ["0", "0", "0", "0"], row
    assert " -0 " not in out and "-0.0000" not in out
    for _ in range(3):
        assert main(["run", "demo:clamp", "--capture", "0", "--clamp", "0=-0.5:0.5", "--json"]) == 0
        t = json.loads(capsys.readouterr().out)["timings_ms"]
        assert t["overhead"] >= 0 and t["overhead"] == pytest.approx(
            max(0.0, t["intervened"] - t["baseline"]), abs=1e-3)


def test_num_never_signs_a_zero():
    from hookscope.app.headless import num

    assert num(-0.0, ".4g") == "0" and num(-1e-9, ".4f") == "0.0000"
    assert num(-1e-9, ".4g") == "-1e-09" and num(-0.25, ".4f") == "-0.2500"
