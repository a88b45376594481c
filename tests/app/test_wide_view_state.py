"""A layer's chosen view (map, norms, top-k) and log choice are part of the
session: saved with it and back when the session reopens in a window."""

from __future__ import annotations

import json

from PySide6.QtCore import Qt


def _result(qtbot, win):
    qtbot.waitUntil(lambda: win.last_result is not None and win.is_idle(), timeout=30_000)
    return win.last_result


def test_a_picked_view_is_saved_and_reopens_with_the_session(make_window, qtbot, tmp_path):
    win = make_window(["demo:transformer", "--capture", "embed"])
    _result(qtbot, win)
    panel = win.panel.panels()[("embed", 0)]
    qtbot.waitExposed(panel)
    combo = panel.chooser.combo
    combo.setFocus()
    while panel.shown_view != "top_k":
        qtbot.keyClick(combo, Qt.Key.Key_Down)
    qtbot.mouseClick(panel.chooser.log_box, Qt.MouseButton.LeftButton)
    assert win.session.view["layer_views"]["embed"] == {"view": "top_k", "log": True}
    path = win.save_session(str(tmp_path / "v.hookscope.json"))
    assert json.loads(path.read_text())["view"]["layer_views"]["embed"]["view"] == "top_k"
    again = make_window([str(path)])
    _result(qtbot, again)
    reopened = again.panel.panels()[("embed", 0)]
    assert reopened.shown_view == "top_k" and reopened.chooser.log_box.isChecked()
    assert reopened.image.isVisible() and reopened.wide.top_units is not None
