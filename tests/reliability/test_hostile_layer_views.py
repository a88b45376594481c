"""A session file's stored layer views (``view.layer_views``) travel with every run
request as what the panels show: odd values there (not a dict, a view that is not a
string or not offered, a log choice that is not a bool) must neither break the run
nor reach core as they are; the panels then show their default view."""

from __future__ import annotations

import json

from hookscope.core.views import ShapeWanted


def test_odd_stored_layer_views_fall_back_to_the_default_view(make_window, qtbot, tmp_path):
    path = tmp_path / "odd-views.hookscope.json"
    path.write_text(json.dumps({
        "format": "hookscope-session", "version": 1, "model": {"spec": "demo:transformer"},
        "plan": {"capture": ["embed", "encoder", "norm"], "interventions": {}},
        "view": {"layer_views": {"embed": {"view": ["top_k"], "log": "yes"},
                                 "encoder": {"view": "__import__('os')" * 1000, "log": None},
                                 "norm": 7, "head": [1, 2]}}}), encoding="utf-8")
    win = make_window([str(path)])
    qtbot.waitUntil(lambda: win.last_result is not None and win.is_idle(), timeout=30_000)
    assert win.error_text() == ""
    shapes = win.panel.shape_views()
    assert shapes.by_path["embed"].view is None and shapes.by_path["embed"].log is None
    assert "norm" not in shapes.by_path and "head" not in shapes.by_path
    assert all(isinstance(w, ShapeWanted) for w in (*shapes.by_path.values(),
                                                    *shapes.by_call.values()))
    runs = win.worker.runs_done
    win.request_run()
    qtbot.waitUntil(lambda: win.worker.runs_done > runs and win.is_idle(), timeout=30_000)
    for (p, _call), panel in win.panel.panels().items():
        assert panel.shown_view == "map", p
        prep = panel._prepared.shape
        assert prep is not None and prep.view == "map", p
