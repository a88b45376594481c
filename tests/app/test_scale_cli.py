"""``hookscope run`` with a device map, disk offload and a memory budget."""

import io
import json
import sys
from pathlib import Path

import pytest
from hookscope.app.cli import main
from hookscope.app.headless import run_command

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "core"))
import scale_models  # noqa: E402

pytest.importorskip("accelerate")
SPEC = f"{scale_models.PATH}:mlp_stack"


@pytest.fixture
def weights(tmp_path):
    from safetensors.torch import save_file

    path = tmp_path / "w.safetensors"
    save_file(scale_models.mlp_stack()[0].state_dict(), str(path), metadata={"format": "pt"})
    return str(path)


def run_json(argv):
    out = io.StringIO()
    assert run_command(argv, out) == 0
    d = json.loads(out.getvalue())
    d.pop("timings_ms")
    return d


def test_device_map_with_disk_offload_prints_the_in_memory_numbers(weights, tmp_path):
    base = [SPEC, "--weights", weights, "--capture", "0,3,6", "--clamp", "4.lin=-0.1:0.05", "--json"]
    ref = run_json(base)
    got = run_json(base + ["--device-map", "auto", "--max-memory", "cpu=12KB",
                           "--offload", str(tmp_path / "off")])
    assert got == ref
    assert ref["outputs_differ"] and set(ref["captures"]) == {"0", "3", "6"}


def test_memory_budget_chooses_statistics_only_with_a_note(weights, capsys):
    base = [SPEC, "--weights", weights, "--capture", "0,1", "--json"]
    ref = run_json(base)
    capsys.readouterr()
    got = run_json(base + ["--memory-budget", "100B"])
    err = capsys.readouterr().err
    assert "note: statistics only" in err and "--memory-budget" in err
    assert got == ref  # the statistics printed are the same


def test_a_model_that_does_not_fit_without_offload_is_one_line_exit_2(weights, capsys):
    code = main(["run", SPEC, "--weights", weights, "--max-memory", "cpu=12KB"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and err.startswith("hookscope: error:") and "--offload DIR" in err
    assert "\n" not in err


def test_a_bad_size_is_one_line_exit_2(capsys):
    assert main(["run", SPEC, "--max-memory", "cpu=lots"]) == 2
    assert "2GiB" in capsys.readouterr().err
