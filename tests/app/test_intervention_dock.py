"""The window's Intervention dock driven by mouse and keyboard: a kind chosen, a parameter
typed, two tokens and two heads clicked; the plan, the run (equal to the API's compare
with the same plan) and the receipt follow; at 1000×650 the plots keep their room."""

import torch
from PySide6.QtCore import QPoint, Qt
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QDoubleSpinBox

from hookscope.app.layout import MIN_CENTRE
from hookscope.core import At, Plan, Scale, compare, load_model, parse_input
from hookscope.core.plan import head_site
from hookscope.core.views import input_token_strings
from hookscope.widgets.layer_tree_model import COL_INTERVENTION, COL_LAYER

PROMPT = "text:the cat sat on the "
LAYER = "blocks.0.attn"


def wait_idle(qtbot, win, test=lambda r: True):
    qtbot.waitUntil(lambda: win.last_result is not None and win.is_idle() and test(win.last_result),
                    timeout=30_000)
    return win.last_result


def click_row(qtbot, win, path):
    w = win.tree
    w.view.expandAll()
    idx = w.proxy.mapFromSource(w.model.index_for_path(path, COL_LAYER))
    w.view.scrollTo(idx)
    rect = w.view.visualRect(idx)
    QTest.mouseClick(w.view.viewport(), Qt.MouseButton.LeftButton,
                     pos=QPoint(rect.left() + 12, rect.center().y()))
    qtbot.waitUntil(lambda: win.intervention_panel.path() == path)


def choose_kind(qtbot, panel, kind):
    QTest.mouseClick(panel.kind_combo, Qt.MouseButton.LeftButton)
    QTest.keyClicks(panel.kind_combo.view(), kind)
    QTest.keyClick(panel.kind_combo.view(), Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: panel.kind_combo.currentText() == kind)


def show_dock(qtbot, win):
    win.intervention_dock.raise_()   # a tab beside the layer tree in a narrow window
    qtbot.waitUntil(lambda: win.intervention_panel.isVisible())


def test_dock_edits_kind_parameter_tokens_and_heads_and_the_run_follows(make_window, qtbot):
    win = make_window(["demo:lm", "--input", PROMPT, "--live"])
    wait_idle(qtbot, win)
    click_row(qtbot, win, LAYER)
    show_dock(qtbot, win)
    panel = win.intervention_panel
    lm = load_model("demo:lm")
    assert len(panel.head_grid.buttons) == head_site(lm.module.get_submodule(LAYER), LAYER).n_heads
    x = parse_input(PROMPT, lm.example_input, lm.meaning.codec)
    tokens = input_token_strings(x, lm.meaning)
    assert panel.token_strip.count() == len(tokens)

    choose_kind(qtbot, panel, "scale")
    factor = panel.findChild(QDoubleSpinBox, "panel_factor")
    QTest.mouseClick(factor, Qt.MouseButton.LeftButton)
    factor.selectAll()
    QTest.keyClicks(factor, "0.25")
    QTest.keyClick(factor, Qt.Key.Key_Return)
    strip = panel.token_strip
    last = len(tokens) - 1
    for i in (2, last):
        QTest.mouseClick(strip.viewport(), Qt.MouseButton.LeftButton, pos=strip.token_rect_center(i))
    for h in (0, 2):
        QTest.mouseClick(panel.head_grid.buttons[h], Qt.MouseButton.LeftButton)

    want = Scale(0.25, at=At(positions=[2, last], heads=[0, 2]))
    qtbot.waitUntil(lambda: win.session.plan.all_interventions().get(LAYER) == want)
    assert panel.positions_edit.text() == f"2,{last}"
    # the tree's cell shows the summary, its tooltip the full text
    cell = win.tree.model.index_for_path(LAYER, COL_INTERVENTION)
    assert cell.data() == want.describe() and want.describe() in cell.data(Qt.ItemDataRole.ToolTipRole)
    r = wait_idle(qtbot, win, lambda r: r.plan.all_interventions().get(LAYER) == want)
    api = compare(lm.module, x, Plan(interventions={LAYER: want}))
    assert torch.equal(r.output_with, api.output_with)
    assert not torch.equal(r.output_with, r.output_without)
    line = r.receipts[LAYER].line()
    qtbot.waitUntil(lambda: panel.receipt.text() == f"Last run: {line}")
    assert panel.receipt.isVisible() and "fired 1x" in line

    # undo takes the dock back with the plan (it only shows what the session holds)
    win.session.undo()
    qtbot.waitUntil(lambda: win.session.plan.all_interventions().get(LAYER) != want)
    qtbot.waitUntil(lambda: panel.value() == win.session.plan.all_interventions().get(LAYER))


def test_a_refused_selector_shows_in_the_banner_and_the_plan_stays(make_window, qtbot):
    win = make_window(["demo:lm", "--input", PROMPT])
    wait_idle(qtbot, win)
    click_row(qtbot, win, "blocks.1.mlp")
    show_dock(qtbot, win)
    panel = win.intervention_panel
    assert not panel.head_grid.buttons and "heads" in panel.head_grid._none.text()
    choose_kind(qtbot, panel, "zero")
    qtbot.waitUntil(lambda: win.session.plan.all_interventions().get("blocks.1.mlp") is not None)
    before = win.session.plan
    QTest.mouseClick(panel.units_edit, Qt.MouseButton.LeftButton)
    QTest.keyClicks(panel.units_edit, "1:2:3")
    QTest.keyClick(panel.units_edit, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: "step" in win.error_text())
    assert win.session.plan == before


def test_at_1000x650_the_dock_leaves_the_plots_their_room(make_window, qtbot):
    win = make_window(["demo:lm", "--input", PROMPT, "--intervene",
                       f"{LAYER}=zero@heads=0,2@pos=last", "--capture", LAYER])
    win.resize(1000, 650)
    wait_idle(qtbot, win)
    click_row(qtbot, win, LAYER)
    show_dock(qtbot, win)
    qtbot.waitUntil(lambda: win.panel.width() >= MIN_CENTRE)
    centre = win.centralWidget()
    assert centre.width() >= win.width() // 2 and centre.height() >= win.height() // 2
    # a tab beside the layer tree: the output below keeps the height its plots and table need
    assert win.tabifiedDockWidgets(win.intervention_dock) == [win.layer_dock]
    assert win.intervention_dock.width() >= 280 and win.intervention_dock.height() >= 150
    assert win.output_dock.isVisible() and win.output_dock.height() >= win.height() // 2
    from hookscope.app.layout import arrange_docks

    for _ in range(2):   # arranged again (a screenshot, a shrink): the same three places
        arrange_docks(win, force=True)
        assert win.tabifiedDockWidgets(win.intervention_dock) == [win.layer_dock]
        assert win.tabifiedDockWidgets(win.output_dock) == []
    assert win.intervention_panel.head_grid.heads() == [0, 2]
    win.resize(1400, 900)
    qtbot.waitUntil(lambda: win._dock_mode == "columns")
    qtbot.waitUntil(lambda: win.intervention_dock.isVisible() and win.output_dock.isVisible())
    qtbot.waitUntil(lambda: win.output_dock.height() >= 250 and win.intervention_dock.height() >= 250)
    assert win.dockWidgetArea(win.intervention_dock) == win.dockWidgetArea(win.output_dock)
    assert centre.width() >= 600


def test_cell_editor_labels_stay_whole_in_a_narrow_tree(make_window, qtbot):
    from PySide6.QtWidgets import QLabel

    from hookscope.widgets.intervention_editor import InterventionEditor

    win = make_window(["demo:lm", "--intervene", "blocks.1.mlp=zero:3,7@pos=last"])
    win.resize(1000, 650)
    wait_idle(qtbot, win)
    view, model = win.tree.view, win.tree.model
    view.expandAll()
    idx = win.tree.proxy.mapFromSource(model.index_for_path("blocks.1.mlp", COL_INTERVENTION))
    view.scrollTo(idx)
    QTest.mouseClick(view.viewport(), Qt.MouseButton.LeftButton, pos=view.visualRect(idx).center())
    QTest.keyClick(view, Qt.Key.Key_F2)
    qtbot.waitUntil(lambda: view.findChild(InterventionEditor) is not None)
    editor = view.findChild(InterventionEditor)
    qtbot.waitUntil(lambda: editor.isVisible())
    labels = editor.findChildren(QLabel)
    assert {lb.text() for lb in labels} >= {"units", "dim", "at"}
    for lb in labels:
        assert lb.width() >= lb.fontMetrics().horizontalAdvance(lb.text())
    assert editor.kind_combo.width() >= editor.kind_combo.fontMetrics().horizontalAdvance("zero") + 16
    assert 0 <= editor.x() and editor.geometry().right() <= view.viewport().width()
    # the cell's summary starts with the kind, its tooltip has the whole text
    cell = model.index_for_path("blocks.1.mlp", COL_INTERVENTION)
    iv = model.intervention("blocks.1.mlp")
    assert iv.describe() in cell.data(Qt.ItemDataRole.ToolTipRole)


def test_dock_head_grid_on_a_hugging_face_gpt2_equals_the_api(make_window, qtbot, tmp_path):
    import sys
    from pathlib import Path

    import pytest

    pytest.importorskip("transformers", reason="the hf extra (transformers) is not installed")
    sys.path.insert(0, str(Path(__file__).parents[1] / "core"))
    import hf_models

    from hookscope.core import Zero

    spec = f"hf:{hf_models.gpt2(tmp_path / 'g')}"
    layer, prompt = "transformer.h.0.attn", "text:the cat sat on the"
    win = make_window([spec, "--input", prompt, "--live"])
    qtbot.waitUntil(lambda: win.last_result is not None and win.is_idle(), timeout=60_000)
    lm = load_model(spec)
    click_row(qtbot, win, layer)
    show_dock(qtbot, win)
    panel = win.intervention_panel
    n = lm.module.get_submodule(layer).num_heads
    assert len(panel.head_grid.buttons) == n
    choose_kind(qtbot, panel, "zero")
    QTest.mouseClick(panel.head_grid.buttons[n - 1], Qt.MouseButton.LeftButton)
    strip = panel.token_strip
    last = strip.count() - 1
    QTest.mouseClick(strip.viewport(), Qt.MouseButton.LeftButton, pos=strip.token_rect_center(last))
    want = Zero(at=At(positions=[last], heads=[n - 1]))
    r = wait_idle(qtbot, win, lambda r: r.plan.all_interventions().get(layer) == want)
    x = parse_input(prompt, lm.example_input, lm.meaning.codec)
    api = compare(lm.module, x, Plan(interventions={layer: want}))
    assert torch.equal(r.output_with.logits, api.output_with.logits)
    assert not torch.equal(r.output_with.logits, r.output_without.logits)
    qtbot.waitUntil(lambda: panel.receipt.text() == f"Last run: {r.receipts[layer].line()}")
