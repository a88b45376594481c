"""File → Compare with…: demo:cnn against itself with conv2's weights nudged, typed into the
dialog; the Divergence dock shows what hookscope.core.diff says, conv2 starred first; a
click on a point selects that layer in the tree; a bad tolerance is shown, the window
stays usable."""

from __future__ import annotations


from PySide6.QtCore import Qt
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QDialogButtonBox

from hookscope.core import diff
from tests.support.compare_window import cnn_window, compare_dialog, nudged_cnn
from tests.support.keys import retype
from tests.support.screenshots import wanted, save_shot


def test_compare_with_nudged_weights(make_window, qtbot, tmp_path):
    lm, weights = nudged_cnn(tmp_path)
    want = diff(lm, weights=str(weights))

    win = cnn_window(make_window, qtbot)
    tool = win.compare_tool
    assert not tool.dock.isVisible()

    dlg = compare_dialog(win, qtbot)
    retype(dlg.weights, str(weights))
    ok = dlg.buttons.button(QDialogButtonBox.StandardButton.Ok)
    QTest.mouseClick(ok, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: tool.result is not None and win.is_idle(), timeout=60_000)
    got = tool.result
    assert [(r.path, r.max_abs_diff) for r in got.layers] == \
        [(r.path, r.max_abs_diff) for r in want.layers]
    assert got.first_divergent.path == "conv2"
    assert tool.dock.isVisible() and tool.view.first.getData()[0].tolist() == [4.0]
    assert "conv2" in win.statusBar().currentMessage()

    view = tool.view
    qtbot.waitUntil(lambda: view.graphics.isVisible() and view.graphics.width() > 100)
    pos = view.graphics.mapFromScene(view.point_center(4))
    with qtbot.waitSignal(view.layerChosen):
        QTest.mouseClick(view.graphics.viewport(), Qt.MouseButton.LeftButton, pos=pos)
    assert win.tree.selected_path() == "conv2"

    if wanted():
        for w, h in ((1000, 650), (1400, 900)):
            win.resize(w, h)
            qtbot.wait(200)
            save_shot(win, f"compare_window_{w}x{h}")

    # a tolerance that is not a number: shown, nothing runs, the window stays usable
    dlg = compare_dialog(win, qtbot)
    retype(dlg.tolerance, "lots")
    QTest.mouseClick(dlg.buttons.button(QDialogButtonBox.StandardButton.Ok),
                     Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: "tolerance 'lots'" in win.error_text(), timeout=5000)
    assert tool.result is got


def test_layers_only_model_b_has_are_said_in_the_divergence_dock(make_window, qtbot):
    """Model B a factory whose tree differs from A's (typed into the dialog): the layers only
    one model runs, and the call only B makes, are said under the plot."""
    from tests.support import differing_trees

    source = differing_trees.__file__
    want = diff(differing_trees.Net(norm=True).eval(),
                differing_trees.Net(extras=6, twice=True).eval(), differing_trees.example())
    win = make_window([f"{source}:build_a"])
    qtbot.waitUntil(lambda: win.last_result is not None and win.is_idle(), timeout=60_000)
    tool = win.compare_tool
    dlg = compare_dialog(win, qtbot)
    retype(dlg.spec, f"{source}:build_b")
    QTest.mouseClick(dlg.buttons.button(QDialogButtonBox.StandardButton.Ok),
                     Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: tool.result is not None and win.is_idle(), timeout=60_000)
    got = tool.result
    assert (got.only_in_a, got.only_in_b) == (want.only_in_a, want.only_in_b)
    line = tool.view.unaligned
    qtbot.waitUntil(line.isVisible)
    assert line.text().startswith(f"only in B (6): {', '.join(want.only_in_b[:4])} and 2 more "
                                  "· only in A (1): norm")
    assert "'act': 1 and 2" in line.text()
    if wanted():
        win.resize(1400, 900)
        qtbot.wait(200)
        save_shot(win, "compare_unaligned_1400x900")
