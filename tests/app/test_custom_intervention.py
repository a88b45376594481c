"""A kind defined here, registered once, works through compare(), the CLI, the script,
a Session (and its saved file) and the tree's Intervention editor.

This is the proof that adding a kind touches only a class and one registry entry.
"""

import json
import subprocess
import sys
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import pytest
import torch
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QDoubleSpinBox

from hookscope.app.cli import main
from hookscope.core import Intervention, Plan, Session, compare, kinds, load_model, param
from hookscope.core.export.export import standalone_script
from hookscope.core.plan.intervention_registry import register, unregister
from hookscope.widgets.intervention_editor import InterventionEditor
from hookscope.widgets.layer_tree_model import COL_INTERVENTION


def shift_leaf(t, module, source, by):
    """The arithmetic, once: the kind applies it and the exported script copies its source."""
    return t + by


@dataclass(frozen=True)
class Shift(Intervention):
    """Add ``by`` to every value (integers: rounded)."""

    by: float = param("float", lo=-100.0, hi=100.0, start=1.0, help="offset")
    name: ClassVar[str] = "shift"
    draggable: ClassVar[tuple[str, ...]] = ("by",)
    leaf_function: ClassVar[Any] = staticmethod(shift_leaf)

    def apply_tensor(self, t, ctx):
        return shift_leaf(t, ctx.module, None, self.by)


@pytest.fixture
def shift_kind():
    register(Shift)
    yield Shift
    unregister("shift")
    assert "shift" not in kinds()


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


def test_custom_kind_through_a_session_and_its_saved_file(shift_kind, tmp_path):
    want = by_hand(load_model("demo:features"), 0.75)
    s = Session.load("demo:features")
    try:
        s.capture("fc1")
        s.intervene("fc1", Shift(0.75))
        r = s.run()
        f = s.save(tmp_path / "shift.hookscope.json")
    finally:
        assert s.close()
    torch.testing.assert_close(r.output_with, want)
    saved = json.loads(f.read_text())
    assert saved["plan"]["interventions"] == {"fc1": {"kind": "shift", "by": 0.75}}

    again = Session.open_file(f)
    try:
        r2 = again.run()
    finally:
        assert again.close()
    assert again.plan.interventions == {"fc1": Shift(0.75)}
    assert torch.equal(r2.output_with, r.output_with)
    assert torch.equal(r2.captures["fc1"][0].tensor, r.captures["fc1"][0].tensor)


def test_custom_kind_is_chosen_and_stepped_in_the_trees_editor(shift_kind, make_window, qtbot):
    win = make_window(["demo:features", "--capture", "fc3", "--live"])
    qtbot.waitUntil(lambda: win.last_result is not None and win.is_idle(), timeout=30_000)
    view, model = win.tree.view, win.tree.model
    idx = win.tree.proxy.mapFromSource(model.index_for_path("fc1", COL_INTERVENTION))
    view.scrollTo(idx)
    qtbot.mouseClick(view.viewport(), Qt.MouseButton.LeftButton, pos=view.visualRect(idx).center())
    qtbot.keyClick(view, Qt.Key.Key_F2)
    editor = view.findChild(InterventionEditor)
    assert editor is not None
    combo = editor.kind_combo
    assert "shift" in [combo.itemText(i) for i in range(combo.count())]
    qtbot.keyClicks(combo, "shift")
    assert win.session.plan.interventions == {"fc1": Shift(1.0)}  # the parameter's start
    spin = editor.findChild(QDoubleSpinBox, f"param_{Shift.draggable[0]}")
    assert spin is not None
    for _ in range(2):
        qtbot.keyClick(spin, Qt.Key.Key_Up)
    by = spin.value()
    assert by > 1.0
    qtbot.waitUntil(lambda: win.is_idle() and win.last_result.plan.interventions.get("fc1")
                    == Shift(by), timeout=30_000)  # Live: the steps re-ran the model
    torch.testing.assert_close(win.last_result.output_with, by_hand(load_model("demo:features"), by))
    assert model.index_for_path("fc1", COL_INTERVENTION).data() == Shift(by).describe()
    qtbot.keyClick(view.focusWidget() or spin, Qt.Key.Key_Return)  # the editing session ends
    qtbot.waitUntil(lambda: view.findChild(InterventionEditor) is None)
