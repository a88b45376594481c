"""The window's language-model views, attached in one call: View → Logit lens, a
dock (hidden until asked for, so the default layout is unchanged) with the
lens grid of each run.

While the dock is shown, the session computes the lens with every run (in the
runner's thread, like the run itself; ``Session.set_derived``); hidden, it
costs nothing. A model whose final norm and unembedding are not recognised gets
a sentence in the dock, not a failed run.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QDockWidget

from hookscope.core import HookscopeError, RunResult
from hookscope.core.logit_lens import LensRequest, LensResult, find_lens_head, target_id
from hookscope.widgets.lens_view import LensView

from .window_tools import _menu

if TYPE_CHECKING:
    from .main_window import MainWindow


def install_lm_tools(win: "MainWindow") -> None:
    """Add View → Logit lens and its dock to ``win``."""
    win.lens_view = LensView()
    dock = QDockWidget("Logit lens", win, objectName="lensDock")  # type: ignore[call-overload]  # stubs omit Qt-property kwargs
    dock.setWidget(win.lens_view)
    win.addDockWidget(Qt.DockWidgetArea.BottomDockWidgetArea, dock)
    dock.hide()   # View → Logit lens shows it
    win.lens_dock = dock
    toggle = dock.toggleViewAction()
    toggle.setObjectName("actionViewLens")
    view_menu = _menu(win, "View")
    if view_menu is not None:
        view_menu.addAction(toggle)
    dock.visibilityChanged.connect(lambda _shown: ask_for_lens(win))
    win.lens_view.tokenChanged.connect(lambda _t: ask_for_lens(win))
    win.modelLoaded.connect(lambda _spec: ask_for_lens(win, run=False))
    win.resultShown.connect(lambda result: show_lens(win, result))


def ask_for_lens(win: "MainWindow", run: bool = True) -> None:
    """Compute the lens with every run while the dock is shown (and run once now)."""
    model = win.session.model
    wanted = win.lens_dock.isVisible() and model is not None
    request = None
    if wanted:
        assert model is not None
        try:
            find_lens_head(model.module)
        except HookscopeError as exc:
            win.lens_view.show_lens(None)
            win.lens_view.show_note(str(exc))
            wanted = False
        else:
            token = win.lens_view.token.text().strip() or None
            try:
                if token is not None:
                    target_id(token, model.meaning, vocab=1 << 62)
            except HookscopeError as exc:
                win.show_error(str(exc))
                token = None
            request = LensRequest(target=token)
    before = win.session.derived.get("lens")
    win.session.set_derived("lens", request)
    if run and request is not None and request != before and not win.is_live():
        win.request_run()


def show_lens(win: "MainWindow", result: object) -> None:
    lens = result.extras.get("lens") if isinstance(result, RunResult) else None
    if isinstance(lens, LensResult):
        win.lens_view.show_lens(lens)
        fit_lens_dock(win)


def fit_lens_dock(win: "MainWindow") -> None:
    """The dock as tall as its grid needs, at most a third of the window."""
    if win.lens_dock.isVisible() and not win.lens_dock.isFloating():
        height = min(win.lens_view.wanted_height() + 24, max(win.height() // 3, 120))
        win.resizeDocks([win.lens_dock], [height], Qt.Orientation.Vertical)
