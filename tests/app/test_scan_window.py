"""View → Scan: an input set opened, a unit typed, Run clicked; the scan arrives from the
runner with the numbers scan() gives: the unit's top inputs as thumbnails (images) or
text with the peak token highlighted, the per-input table sortable by clicking a header;
double-clicking an input opens it in the main view; Cancel stops a long scan."""

from __future__ import annotations

from pathlib import Path

import torch
from PySide6.QtCore import QPoint, Qt
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QLabel

from hookscope.core import Zero, parse_input
from hookscope.core.analyses import ScanRequest, scan
from hookscope.core.dataset import open_inputs
from tests.support.window_menus import click_menu_action

DIGITS = Path(__file__).resolve().parents[2] / "resources" / "digits_test.safetensors"


def _type(field, text):
    field.setFocus()
    QTest.keyClick(field, Qt.Key.Key_A, Qt.KeyboardModifier.ControlModifier)
    QTest.keyClicks(field, text)


def _ready(win, qtbot):
    win.resize(1100, 850)
    qtbot.waitUntil(lambda: win.last_result is not None and win.is_idle(), timeout=60_000)


def test_digits_scan_shows_top_inputs_and_the_effect_table(make_window, qtbot, tmp_path):
    win = make_window(["demo:cnn"])
    _ready(win, qtbot)
    tool = win.scan_tool
    assert tool.open(DIGITS)
    assert tool.dock.isVisible() and "200 inputs" in tool.view.inputs_label.text()
    win.session.intervene("conv2", Zero(units=(3,)))
    view = tool.view
    _type(view.unit, "conv2:3")
    QTest.mouseClick(view.run_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: view.model.result is not None and win.is_idle(), timeout=60_000)
    got = view.model.result
    want = scan(win.session.model, ScanRequest(open_inputs(DIGITS), ("conv2",),
                                               {"conv2": "zero:3"}))
    assert [t.index for t in got.top_inputs("conv2", 3)] == \
           [t.index for t in want.top_inputs("conv2", 3)]
    assert got.per_class() == want.per_class()
    assert "accuracy" in view.summary.text() and "with the interventions" in view.summary.text()
    assert view.top_list.count() == 9 and not view.top_list.item(0).icon().isNull()
    assert view.progress.isHidden() and view.run_button.isEnabled()
    # Sorting by the metric with the interventions: click its header (twice: descending).
    view.tabs.setCurrentIndex(1)
    table = view.table
    header = table.horizontalHeader()
    x = header.sectionViewportPosition(6) + header.sectionSize(6) // 2
    QTest.mouseClick(header.viewport(), Qt.MouseButton.LeftButton,
                     pos=QPoint(x, header.height() // 2))
    proxy = view.proxy
    col = [proxy.index(r, 6).data(Qt.ItemDataRole.UserRole + 1) for r in range(proxy.rowCount())]
    assert col == sorted(col) and col != [r.metric_with for r in got.rows]
    # Save CSV: the rows as the result's own CSV; never over the input set it read.
    assert view.csv_button.isEnabled()
    csv_path = tmp_path / "effect.csv"
    assert tool.save_csv(csv_path) and csv_path.read_text() == got.to_csv()
    before_bytes = DIGITS.read_bytes()
    assert not tool.save_csv(DIGITS)
    assert DIGITS.read_bytes() == before_bytes and "would overwrite" in win.error_text()
    # One click on the best input of the unit opens it in the main view and runs it.
    view.tabs.setCurrentIndex(0)
    best = got.top_inputs("conv2", 3)[0].index
    item = view.top_list.item(0)
    rect = view.top_list.visualItemRect(item)
    before = win.last_result
    QTest.mouseClick(view.top_list.viewport(), Qt.MouseButton.LeftButton, pos=rect.center())
    qtbot.waitUntil(lambda: win.last_result is not before and win.is_idle(), timeout=60_000)
    x_shown = parse_input(win.session.input_text, win.session.model.example_input)
    assert torch.equal(x_shown, open_inputs(DIGITS).item(best))


def test_text_scan_highlights_the_peak_token(make_window, qtbot, tmp_path):
    f = tmp_path / "p.txt"
    f.write_text("the cat sat on the mat\nhello world\nthe dog ran off\n")
    win = make_window(["demo:lm"])
    _ready(win, qtbot)
    tool = win.scan_tool
    assert tool.open(f)
    _type(tool.view.unit, "blocks.1:7")
    QTest.mouseClick(tool.view.run_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: tool.view.model.result is not None and win.is_idle(), timeout=60_000)
    res = tool.view.model.result
    top = res.top_inputs("blocks.1", 7)
    labels = [tool.view.top_list.itemWidget(tool.view.top_list.item(i))
              for i in range(tool.view.top_list.count())]
    assert len(labels) == 3 and all(isinstance(lb, QLabel) for lb in labels)
    peak = top[0].tokens[top[0].position]
    assert f"font-weight:bold'>{peak}</span>" in labels[0].text()


def test_cancel_stops_a_long_scan_and_a_bad_unit_says_so(make_window, qtbot, tmp_path):
    f = tmp_path / "many.txt"
    # every line a different length from the one before: one input a batch, a long scan
    f.write_text("\n".join("the cat sat"[: 1 + i % 11] for i in range(50_000)))
    win = make_window(["demo:lm"])
    _ready(win, qtbot)
    tool = win.scan_tool
    _type(tool.view.unit, "blocks.0")
    assert tool.open(f)
    QTest.mouseClick(tool.view.run_button, Qt.MouseButton.LeftButton)
    assert "LAYER:INDEX" in win.error_text()
    _type(tool.view.unit, "blocks.0:1")
    QTest.mouseClick(tool.view.run_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: tool.view.progress.value() > 0, timeout=30_000)
    assert tool.view.cancel_button.isEnabled() and "left" in tool.view.eta.text()
    QTest.mouseClick(tool.view.cancel_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: win.is_idle(), timeout=60_000)
    assert tool.view.run_button.isEnabled() and tool.view.summary.text() == "cancelled"
    assert tool.view.model.result is None


def test_open_inputs_offers_images_and_an_image_opens_its_folder_of_classes(make_window, qtbot,
                                                                            tmp_path):
    """File → Open inputs lists images beside the set files; an image picked in a class
    subfolder opens the whole folder of images, its subfolders as classes."""
    from PySide6.QtGui import QAction, QColor, QImage
    from PySide6.QtWidgets import QFileDialog, QLineEdit

    root = tmp_path / "digits"
    for cls in ("three", "seven"):
        (root / cls).mkdir(parents=True)
        for i in range(2):
            img = QImage(8, 8, QImage.Format.Format_Grayscale8)
            img.fill(QColor(40 * i, 40 * i, 40 * i))
            assert img.save(str(root / cls / f"{i}.png"))
    win = make_window(["demo:cnn"])
    _ready(win, qtbot)
    click_menu_action(qtbot, win, "&File", "actionOpenInputs")
    qtbot.waitUntil(lambda: win.findChild(QFileDialog, "openInputsDialog") is not None)
    dlg = win.findChild(QFileDialog, "openInputsDialog")
    qtbot.waitExposed(dlg)
    assert "*.png" in dlg.nameFilters()[0] and "*.safetensors" in dlg.nameFilters()[0]
    name = dlg.findChild(QLineEdit, "fileNameEdit")
    name.setFocus()
    dlg.setDirectory(str(root / "seven"))   # where the person browsed to
    QTest.keyClicks(name, "1.png")
    QTest.keyClick(name, Qt.Key.Key_Return)
    tool = win.scan_tool
    qtbot.waitUntil(lambda: tool.inputs is not None)
    assert Path(tool.inputs.source) == root and tool.inputs.class_names == ["seven", "three"]
    assert len(tool.inputs) == 4 and tool.view.inputs_label.text() == "digits: 4 inputs"
    assert tool.dock.isVisible() and not tool.dock.visibleRegion().isEmpty()
