"""A kind defined here, registered once, works through compare(), the CLI and the script.

This is the proof that adding a kind touches only a class and one registry entry.
"""

import json
import subprocess
import sys
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import pytest
import torch

from hookscope.app.cli import main
from hookscope.core import Intervention, Plan, compare, load_model, param
from hookscope.core.export import standalone_script
from hookscope.core.intervention_registry import register, unregister


@dataclass(frozen=True)
class Shift(Intervention):
    """Add ``by`` to every value (integers: rounded)."""

    by: float = param("float", lo=-100.0, hi=100.0, start=1.0, help="offset")
    name: ClassVar[str] = "shift"
    draggable: ClassVar[tuple[str, ...]] = ("by",)
    leaf_function: ClassVar[str] = '''
def shift_leaf(t, module, source, by):
    return t + by
'''

    def apply_tensor(self, t, ctx):
        return t + self.by


@pytest.fixture
def shift_kind():
    register(Shift)
    yield Shift
    unregister("shift")


def by_hand(lm, by):
    h = lm.module.fc1.register_forward_hook(lambda m, i, o: o + by)
    try:
        with torch.inference_mode():
            return lm.module(lm.example_input)
    finally:
        h.remove()


def test_custom_kind_through_compare_cli_and_script(shift_kind, capsys, tmp_path):
    lm = load_model("demo:features")
    want = by_hand(lm, 0.75)
    r = compare(lm.module, lm.example_input, Plan(capture=["fc1"], interventions={"fc1": Shift(0.75)}))
    torch.testing.assert_close(r.output_with, want)
    assert r.captures["fc1"][0].stats.fraction_changed == 1.0

    code = main(["run", "demo:features", "--capture", "fc1", "--intervene", "fc1=shift:0.75", "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    data = json.loads(out)
    np.testing.assert_allclose(data["output_with"], want.flatten().tolist(), rtol=1e-6)
    assert data["interventions"]["fc1"] == {"kind": "shift", "by": 0.75}

    script = tmp_path / "x.py"
    script.write_text(standalone_script("demo:features", Plan(interventions={"fc1": Shift(0.75)})))
    run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    got = json.loads(run.stdout.strip().splitlines()[-1])
    np.testing.assert_allclose(got["output_with"], want.flatten().tolist(), atol=1e-6)

    assert Intervention.from_dict({"kind": "shift", "by": 2}) == Shift(2.0)
    code = main(["run", "demo:features", "--intervene", "fc1=shift:lots"])
    assert code == 2 and "BY must be a number" in capsys.readouterr().err
