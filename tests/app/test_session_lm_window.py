"""A session file's SAEs and LM views reopen in the window: the SAE attached again, the
generation and lens docks given the saved settings, and the first run computes them."""

from __future__ import annotations

from hookscope.core import SaeAblate, Session
from hookscope.core.analyses import GenerateRequest, LensRequest, SaeRequest
from hookscope.core.session import ViewFailed


def test_a_session_files_lm_views_reopen_in_the_window(make_window, qtbot, tmp_path):
    s = Session.load("demo:lm", input_text="text:the cat sat")
    try:
        s.attach_sae("blocks.0", "demo")
        s.intervene("blocks.0", SaeAblate((1, 2)))
        for view in (LensRequest(None, "t"), GenerateRequest(3, 0.5, 4), SaeRequest(("blocks.0",))):
            s.set_derived(view.name, view)
        path = s.save(tmp_path / "lm.hookscope.json")
    finally:
        s.close()
    win = make_window([str(path)])
    qtbot.waitUntil(lambda: win.last_result is not None and win.is_idle()
                    and {"generation", "sae"} <= set(win.last_result.extras), timeout=60_000)
    assert win.session.saes == {"blocks.0": "demo"}
    # the analysis docks share one tab area: the generation in front, the lens's tab behind
    # it holding the saved token for when it is brought forward
    assert win.generation_dock.isVisible()
    view = win.generation_view
    assert (view.steps.value(), view.temperature.value(), view.seed.value()) == (3, 0.5, 4)
    assert win.lens_view.token.text() == "t"
    extras = win.last_result.extras
    assert not any(isinstance(extras[n], ViewFailed) for n in ("generation", "sae"))
    assert extras["generation"].without.ids and list(extras["sae"]) == ["blocks.0"]
