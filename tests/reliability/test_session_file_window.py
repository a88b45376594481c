"""Catalogue rows for session files opened in the window: a file the reader accepts must
not break the window later (found by hand: a ``view.selected`` that is not a layer path
raised TypeError inside the model-loaded reaction, in the event loop)."""

from __future__ import annotations

import pytest

from hookscope.core.session.session_file import SessionFileError, read_session_file

HEAD = '{"format": "hookscope-session", "version": 1, "model": {"spec": "demo:clamp"}, '


@pytest.mark.parametrize("view", ['{"selected": ["0"]}', '{"selected": {"a": 1}}', '{"selected": 3}'])
def test_a_view_selection_that_is_not_a_layer_path_is_refused_by_the_reader(view, tmp_path):
    path = tmp_path / "odd.hookscope.json"
    path.write_text(HEAD + f'"view": {view}}}', encoding="utf-8")
    with pytest.raises(SessionFileError, match="view.selected"):
        read_session_file(path)


def test_the_window_shows_a_refused_view_in_the_banner_and_keeps_its_model(window, qtbot, tmp_path):
    path = tmp_path / "odd.hookscope.json"
    path.write_text(HEAD + '"view": {"selected": ["0"]}}', encoding="utf-8")
    before = (window.loaded, window.session.plan, window.last_result)
    with qtbot.waitSignal(window.errorShown, timeout=10_000) as sig:
        assert window.open_session(str(path)) is None
    assert "odd.hookscope.json" in sig.args[0] and "view.selected" in sig.args[0]
    assert (window.loaded, window.session.plan, window.last_result) == before
    qtbot.waitUntil(window.is_idle, timeout=30_000)


def test_a_selection_of_an_unknown_layer_opens_and_selects_nothing(window, qtbot, tmp_path):
    path = tmp_path / "gone.hookscope.json"
    path.write_text(HEAD + '"view": {"selected": "no.such.layer"}}', encoding="utf-8")
    with qtbot.waitSignal(window.modelLoaded, timeout=30_000):
        window.open_session(str(path))
    qtbot.waitUntil(lambda: window.is_idle() and window.last_result is not None, timeout=30_000)
    assert not window.tree.view.currentIndex().isValid()
