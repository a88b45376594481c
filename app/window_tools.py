"""The window's daily tools, attached in one call: readouts in the status bar,
File → Export figure, and View → Hooks with its leak warning.

Kept out of main_window.py (wiring only): :func:`install_window_tools` takes
the built window, adds its actions and docks, and connects the signals.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, cast

from PySide6.QtCore import Qt
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import QDockWidget, QMenu

from hookscope.core import HookscopeError
from hookscope.core.model import list_hooks
from hookscope.core.base import refuse_overwrite
from hookscope.widgets.hooks_view import HooksView
from hookscope.widgets.last_folder import pick_file

if TYPE_CHECKING:
    from .main_window import MainWindow


def _menu(win: "MainWindow", title: str) -> QMenu | None:
    for act in win.menuBar().actions():
        if act.menu() is not None and act.text().replace("&", "") == title:
            return cast(QMenu, act.menu())  # the stubs say QObject; a menu's action gives its QMenu
    return None


def insert_file_action(win: "MainWindow", act: QAction, after_name: str) -> None:
    """Put ``act`` in the File menu right after the action named ``after_name`` (at the end
    where that action is not in the menu)."""
    file_menu = _menu(win, "File")
    if file_menu is None:
        return
    after = win.findChild(QAction, after_name)
    actions = file_menu.actions()
    i = actions.index(after) + 1 if after in actions else len(actions)
    file_menu.insertAction(actions[i] if i < len(actions) else None, act)  # type: ignore[arg-type]


def install_window_tools(win: "MainWindow") -> None:
    """Add the readouts, File → Export figure and View → Hooks to ``win``."""
    win.panel.readout.connect(win.status.show_readout)
    win.outputs.readout.connect(win.status.show_readout)

    export = QAction("Export &figure…", win)
    export.setObjectName("actionExportFigure")
    export.setShortcut(QKeySequence("Ctrl+Shift+E"))
    export.setStatusTip("Save every activation panel as one PNG or SVG figure")
    export.triggered.connect(lambda: export_figure(win))
    file_menu = _menu(win, "File")
    if file_menu is not None:
        after = win.findChild(QAction, "actionExportScript")
        actions = file_menu.actions()
        i = actions.index(after) + 1 if after in actions else len(actions)
        # The stubs want a QAction there; Qt takes None to mean "append" (hence the ignore).
        file_menu.insertAction(actions[i] if i < len(actions) else None, export)  # type: ignore[arg-type]
    win.addAction(export)

    win.hooks_view = HooksView()
    win.hooks_dock = QDockWidget("Hooks", win, objectName="hooksDock")  # type: ignore[call-overload]  # stubs omit Qt-property kwargs
    win.hooks_dock.setWidget(win.hooks_view)
    win.addDockWidget(Qt.DockWidgetArea.BottomDockWidgetArea, win.hooks_dock)
    win.hooks_dock.hide()   # View → Hooks shows it
    win.hooks_dock.visibilityChanged.connect(lambda shown: fit_hooks_dock(win) if shown else None)
    toggle = win.hooks_dock.toggleViewAction()
    toggle.setObjectName("actionViewHooks")
    view_menu = _menu(win, "View")
    if view_menu is not None:
        view_menu.addAction(toggle)
    win.resultShown.connect(lambda _result: refresh_hooks(win))
    win.modelLoaded.connect(lambda _spec: refresh_hooks(win))


def fit_hooks_dock(win: "MainWindow") -> None:
    """The Hooks dock as tall as its list needs, at most a quarter of the window: an
    empty list is one sentence, not a third of the window's height."""
    if win.hooks_dock.isFloating():
        return
    height = min(win.hooks_view.wanted_height() + 24, max(win.height() // 4, 80))   # + its title
    win.resizeDocks([win.hooks_dock], [height], Qt.Orientation.Vertical)


def refresh_hooks(win: "MainWindow") -> bool:
    """List the hooks on the open model; warn in the banner if Hookscope left one.

    Only when nothing is in flight: during a run Hookscope's hooks are meant to
    be there. Returns whether the list was refreshed.
    """
    if win.loaded is None or not win.is_idle():
        return False
    hooks = list_hooks(win.loaded.module)
    win.hooks_view.show_hooks(hooks)
    if win.hooks_dock.isVisible():
        fit_hooks_dock(win)
    ours = [h for h in hooks if h.is_hookscope]
    if ours:
        where = ", ".join(sorted({h.path or "(the model)" for h in ours})[:4])
        win.show_error(f"Hookscope left {len(ours)} hook{'s' if len(ours) != 1 else ''} on the "
                       f"model after its run (on {where}): a bug, please report it. View → Hooks "
                       "lists them; reopen the model to get rid of them.")
    return True


def export_figure(win: "MainWindow", path: str | None = None) -> Path | None:
    """File → Export figure: every activation panel and the output as one PNG or SVG."""
    if path is None:
        path = pick_file(win, "export", "Export figure", "PNG image (*.png);;SVG drawing (*.svg)",
                         save=True, file_name="activations.png")
        if not path:
            return None
    try:
        from .export_actions import files_the_session_reads

        refuse_overwrite([("the figure", path)], files_the_session_reads(win.session),
                         "the open model")
        written = win.panel.export_figure(path, beside=win.outputs)
    except HookscopeError as exc:
        win.show_error(str(exc))
        return None
    win.statusBar().showMessage(f"figure saved to {written}", 5000)
    return written
