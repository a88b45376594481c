"""A scan shown in the Scan dock is saved with the session (File → Save session) and shown
again when the session opens in a new window, without running it again: the same summary,
per-input table and top inputs of the same unit. An altered sidecar is named in the banner,
the session opens and the dock shows no stale scan."""

from __future__ import annotations

import json
from pathlib import Path

from PySide6.QtCore import Qt
from PySide6.QtTest import QTest

from hookscope.core import Zero
from hookscope.core.session import SIDECAR_SUFFIX
from hookscope.widgets.scan_view import INDEX_ROLE

DIGITS = Path(__file__).resolve().parents[2] / "resources" / "digits_test.safetensors"


def _ready(win, qtbot):
    qtbot.waitUntil(lambda: win.last_result is not None and win.is_idle(), timeout=60_000)


def _table(view) -> list[list[str]]:
    m = view.model
    return [[str(m.index(r, c).data(Qt.ItemDataRole.DisplayRole)) for c in range(m.columnCount())]
            for r in range(m.rowCount())]


def _tops(view) -> list[tuple[int, str]]:
    items = [view.top_list.item(i) for i in range(view.top_list.count())]
    return [(it.data(INDEX_ROLE), it.toolTip()) for it in items]


def test_a_scan_saved_with_the_session_shows_again_in_a_new_window(make_window, qtbot, tmp_path):
    win = make_window(["demo:cnn"])
    _ready(win, qtbot)
    tool = win.scan_tool
    assert tool.open(DIGITS)
    win.session.intervene("conv2", Zero(units=(3,)))
    view = tool.view
    view.unit.setFocus()
    QTest.keyClicks(view.unit, "conv2:3")
    QTest.mouseClick(view.run_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: view.model.result is not None and win.is_idle(), timeout=60_000)
    table, tops, summary = _table(view), _tops(view), view.summary.text()
    assert len(table) == 200 and len(tops) == 9
    path = win.save_session(str(tmp_path / "w.hookscope.json"))
    assert path is not None and (tmp_path / ("w" + SIDECAR_SUFFIX)).is_file()

    again = make_window([str(path)])  # hookscope FILE
    v2 = again.scan_tool.view
    assert again.scan_tool.dock.isVisible() and v2.unit.text() == "conv2:3"
    assert _table(v2) == table and _tops(v2) == tops and v2.summary.text() == summary
    _ready(again, qtbot)
    assert _table(v2) == table  # the opened session's own run leaves the scan shown

    other = make_window(["demo:cnn"])  # File → Open session in a window without a scan
    _ready(other, qtbot)
    other.open_session(str(path))
    v3 = other.scan_tool.view
    assert _table(v3) == table and _tops(v3) == tops
    assert other.scan_tool.save_csv(tmp_path / "again.csv")
    assert (tmp_path / "again.csv").read_text() == view.model.result.to_csv()


def test_an_altered_sidecar_is_named_in_the_banner_and_the_session_opens(make_window, qtbot,
                                                                         tmp_path):
    win = make_window(["demo:cnn"])
    _ready(win, qtbot)
    assert win.scan_tool.open(DIGITS)
    QTest.mouseClick(win.scan_tool.view.run_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: win.scan_tool.view.model.result is not None and win.is_idle(),
                    timeout=60_000)
    path = win.save_session(str(tmp_path / "w.hookscope.json"))
    side = tmp_path / ("w" + SIDECAR_SUFFIX)
    d = json.loads(side.read_text())
    d["rows"][0][3] = (d["rows"][0][3] or 0) + 1
    side.write_text(json.dumps(d))
    again = make_window([])
    _ready(again, qtbot)
    again.open_session(str(path))
    _ready(again, qtbot)
    assert again.session.model is not None and again.session.model.spec == "demo:cnn"
    assert "SHA-256" in again.error_text() and "\n" not in again.error_text()
    assert again.scan_tool.view.model.result is None and again.scan_tool.result is None


def test_a_reopened_text_scan_highlights_the_peak_token_again(make_window, qtbot, tmp_path):
    f = tmp_path / "p.txt"
    f.write_text("the cat sat on the mat\nhello world\nthe dog ran off\n")
    win = make_window(["demo:lm"])
    _ready(win, qtbot)
    tool = win.scan_tool
    assert tool.open(f)
    tool.view.unit.setFocus()
    QTest.keyClicks(tool.view.unit, "blocks.1:7")
    QTest.mouseClick(tool.view.run_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: tool.view.model.result is not None and win.is_idle(), timeout=60_000)

    def snippets(view) -> list[str]:
        return [view.top_list.itemWidget(view.top_list.item(i)).text()
                for i in range(view.top_list.count())]

    shown = snippets(tool.view)
    assert len(shown) == 3 and "font-weight:bold" in shown[0]
    path = win.save_session(str(tmp_path / "t.hookscope.json"))
    f.write_text("changed afterwards\n")  # the saved scan keeps the texts it showed
    other = make_window(["demo:lm"])
    _ready(other, qtbot)
    other.open_session(str(path))
    assert snippets(other.scan_tool.view) == shown
