"""The tree's Device column over a model accelerate split between CPU memory and
disk: each row shows accelerate's device map, the column shows only for a model
spread over several devices, and the window opened with ``--device-map`` shows it."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from PySide6.QtCore import Qt

from hookscope.core import load_model, module_tree
from hookscope.widgets.layer_tree_model import COL_DEVICE, COL_HI, LayerTreeModel
from hookscope.widgets.layer_tree_view import LayerTreeWidget

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "core"))
import scale_models  # noqa: E402

pytest.importorskip("accelerate")
from hookscope.core.model.dispatch import device_map_options, load_dispatched  # noqa: E402

SPEC = f"{scale_models.PATH}:mlp_stack"
TIGHT = "cpu=12KB"   # the first blocks in memory, the rest offloaded to disk (see tests/core)


def _dispatched(tmp_path):
    return load_dispatched(SPEC, None, device_map_options("auto", TIGHT, str(tmp_path / "off")))


def _cells(model: LayerTreeModel, col: int) -> dict[str, str]:
    return {n.path: model.data(model.index_for_path(n.path, col)) for n in model.tree().walk() if n.path}


def test_the_device_column_is_accelerates_device_map(qtbot, qtmodeltester, tmp_path):
    lm = _dispatched(tmp_path)
    dmap = lm.module.hf_device_map
    assert set(dmap.values()) == {"cpu", "disk"}
    w = LayerTreeWidget()
    qtbot.addWidget(w)
    w.model.set_tree(module_tree(lm.module))
    qtmodeltester.check(w.model)
    cells = _cells(w.model, COL_DEVICE)
    for path, where in dmap.items():
        # The mapped module and everything inside it show where accelerate put it.
        assert {cells[p] for p in cells if p == path or p.startswith(path + ".")} == {where}
    assert w.model.devices() == ["cpu", "disk"]
    on_disk = next(p for p, d in dmap.items() if d == "disk")
    tip = w.model.data(w.model.index_for_path(on_disk, COL_DEVICE), Qt.ItemDataRole.ToolTipRole)
    assert on_disk in tip and "offloaded" in tip
    # Shown, right after the clamp bounds.
    header = w.view.header()
    assert not w.view.isColumnHidden(COL_DEVICE)
    assert header.visualIndex(COL_DEVICE) == header.visualIndex(COL_HI) + 1


def test_a_single_device_tree_hides_the_column(qtbot):
    lm = load_model(SPEC)
    w = LayerTreeWidget()
    qtbot.addWidget(w)
    w.model.set_tree(module_tree(lm.module))
    assert w.model.devices() == ["cpu"] and not w.model.spans_devices()
    assert w.view.isColumnHidden(COL_DEVICE)


def test_the_window_opened_with_a_device_map_shows_each_layers_device(make_window, qtbot, tmp_path):
    expected = _dispatched(tmp_path).module.hf_device_map
    win = make_window([SPEC, "--device-map", "auto", "--max-memory", TIGHT,
                       "--offload", str(tmp_path / "win-off")])
    qtbot.waitUntil(lambda: win.last_result is not None and win.is_idle(), timeout=60_000)
    model = win.tree.model
    assert not win.tree.view.isColumnHidden(COL_DEVICE)
    cells = _cells(model, COL_DEVICE)
    assert {p: cells[p] for p in expected} == expected
    # The column is on screen: a visible, non-empty section.
    assert win.tree.view.header().sectionSize(COL_DEVICE) > 0


def test_a_wide_dock_shows_the_device_column_beside_the_bounds(qtbot, tmp_path):
    lm = _dispatched(tmp_path)
    w = LayerTreeWidget()
    qtbot.addWidget(w)
    w.model.set_tree(module_tree(lm.module))
    w.resize(560, 400)
    w.show()
    header, view = w.view.header(), w.view
    qtbot.waitUntil(lambda: header.sectionViewportPosition(COL_DEVICE) + header.sectionSize(COL_DEVICE)
                    <= view.viewport().width())
    assert w.editable_right_edge() <= header.sectionViewportPosition(COL_DEVICE)
    # The Layer cell's tooltip says where the layer lives too.
    on_disk = next(p for p, d in lm.module.hf_device_map.items() if d == "disk")
    tip = w.model.data(w.model.index_for_path(on_disk), Qt.ItemDataRole.ToolTipRole)
    assert tip.startswith(on_disk) and "on disk" in tip
