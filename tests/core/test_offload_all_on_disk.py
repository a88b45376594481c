"""--device-map with so little memory that the whole model goes to disk: it still runs.

accelerate picks an offloaded module's weights by the prefix ``name + "."``; for the
whole model (name ``""``) that finds none and no ``index.json`` is written, so its
first forward failed with FileNotFoundError. Hookscope writes the weights itself then.
"""

import json
from pathlib import Path

import pytest
import torch

from hookscope.app.cli import main

import scale_models

pytest.importorskip("accelerate")

SPEC = f"{scale_models.PATH}:mlp_stack"
PLAN = ["--capture", "0.lin,6", "--clamp", "2.lin=-0.1:0.1", "--json"]


def _run(capsys, argv):
    assert main(["run", SPEC, *argv, *PLAN]) == 0, capsys.readouterr().err
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("weights", [None, "safetensors", "pt"])
def test_everything_on_disk_gives_the_numbers_of_a_plain_run(tmp_path, capsys, weights):
    extra: list[str] = []
    if weights:
        from safetensors.torch import save_file

        module, _ = scale_models.mlp_stack()
        state = {k: v.contiguous() for k, v in module.state_dict().items()}
        path = tmp_path / f"w.{weights}"
        save_file(state, path) if weights == "safetensors" else torch.save(state, path)
        extra = ["--weights", str(path)]
    plain = _run(capsys, extra)
    offload = tmp_path / "offload"
    for budget in ("1KB", "100KB"):  # nothing fits / some blocks fit
        got = _run(capsys, [*extra, "--device-map", "auto", "--max-memory", f"cpu={budget}",
                            "--offload", str(offload)])
        assert got["output_with"] == pytest.approx(plain["output_with"], abs=1e-6)
        assert got["output_without"] == pytest.approx(plain["output_without"], abs=1e-6)
        assert got["captures"]["6"][0]["mean"] == pytest.approx(plain["captures"]["6"][0]["mean"])
    import gc

    gc.collect()  # the offloaded copies go with the model
    assert list(Path(offload).iterdir()) == []
