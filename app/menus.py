"""The main window's menus and their actions (File, Edit, Run, View, Help).

Built from data: the callables each action triggers (:class:`Handlers`), the
devices and the docks, so this module never imports the window. Every action
has an objectName (``actionRun``, ``actionLive``, ...) for scripts.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from PySide6.QtGui import QAction, QActionGroup, QKeySequence
from PySide6.QtWidgets import QMainWindow, QMenu, QWidget

from hookscope.core import demo_names
from hookscope.core.demos import DEMO_DESCRIPTIONS
from hookscope.core.base import DeviceInfo


@dataclass
class Handlers:
    """What each menu entry does (what a handler returns is ignored)."""

    open_model: Callable[[], object]
    open_demo: Callable[[str], object]
    fill_recent: Callable[[QMenu], object]
    open_session: Callable[[], object]
    save_session: Callable[[], object]
    export_captures: Callable[[], object]
    export_script: Callable[[], object]
    quit: Callable[[], object]
    undo: Callable[[], object]
    redo: Callable[[], object]
    run: Callable[[], object]
    set_live: Callable[[bool], object]
    cancel: Callable[[], object]
    set_stats_only: Callable[[bool], object]
    set_device: Callable[[str], object]
    about: Callable[[], object]


@dataclass
class Actions:
    open: QAction
    quit: QAction
    run: QAction
    live: QAction
    cancel: QAction
    stats_only: QAction
    about: QAction
    recent_menu: QMenu
    device_menu: QMenu
    device_group: QActionGroup
    device_actions: dict[str, QAction] = field(default_factory=dict)
    save_session: QAction | None = None
    open_session: QAction | None = None
    undo: QAction | None = None
    redo: QAction | None = None


def _action(owner: QWidget, name: str, text: str, shortcuts: list | None = None,
            tip: str = "", on: Callable | None = None) -> QAction:
    act = QAction(text, owner)
    act.setObjectName(name)
    if shortcuts:
        act.setShortcuts([QKeySequence(s) for s in shortcuts])
    if tip:
        act.setStatusTip(tip)
        act.setToolTip(tip)
    if on is not None:
        act.triggered.connect(lambda _=False: on())
    return act


def build_menus(win: QMainWindow, h: Handlers, devices: list[DeviceInfo],
                view_toggles: list[QAction]) -> Actions:
    bar = win.menuBar()
    file_menu = bar.addMenu("&File")
    open_act = _action(win, "actionOpen", "&Open model…", [QKeySequence.StandardKey.Open],
                       "Open a demo, a Python factory, or a torch.export .pt2 program", h.open_model)
    file_menu.addAction(open_act)
    demo_menu = file_menu.addMenu("Open &demo")
    demo_menu.setObjectName("menuDemo")
    demo_menu.setToolTipsVisible(True)
    for name in demo_names():
        act = demo_menu.addAction(f"demo:{name}")
        act.setObjectName(f"actionDemo_{name}")
        act.setToolTip(DEMO_DESCRIPTIONS.get(name, ""))
        act.triggered.connect(lambda _=False, n=name: h.open_demo(n))
    recent_menu = file_menu.addMenu("Open &recent")
    recent_menu.setObjectName("menuRecent")
    recent_menu.aboutToShow.connect(lambda: h.fill_recent(recent_menu))
    file_menu.addSeparator()
    open_ses = _action(win, "actionOpenSession", "Open &session…", ["Ctrl+Shift+O"],
                       "Open a saved *.hookscope.json session: model, input, plan, options",
                       h.open_session)
    save_ses = _action(win, "actionSaveSession", "&Save session…", [QKeySequence.StandardKey.Save],
                       "Save model, input, device, plan and options to a *.hookscope.json file",
                       h.save_session)
    file_menu.addActions([open_ses, save_ses])
    file_menu.addSeparator()
    export_caps = _action(win, "actionExportCaptures", "&Export captures…", ["Ctrl+E"],
                          "Save the captured tensors to .npz or .safetensors", h.export_captures)
    export_py = _action(win, "actionExportScript", "Export as PyTorch &script…", None,
                        "Write this setup as a plain-PyTorch script with the hooks spelled out",
                        h.export_script)
    file_menu.addActions([export_caps, export_py])
    file_menu.addSeparator()
    quit_act = _action(win, "actionQuit", "&Quit", [QKeySequence.StandardKey.Quit], "", h.quit)
    file_menu.addAction(quit_act)

    edit_menu = bar.addMenu("&Edit")
    undo_act = _action(win, "actionUndo", "&Undo plan edit", ["Ctrl+Z"],
                       "Take back the last change to captures or interventions", h.undo)
    redo_act = _action(win, "actionRedo", "&Redo plan edit", ["Ctrl+Shift+Z", "Ctrl+Y"],
                       "Make the undone change again", h.redo)
    edit_menu.addActions([undo_act, redo_act])

    run_menu = bar.addMenu("&Run")
    run_act = _action(win, "actionRun", "&Run", ["Ctrl+R", "F5"],
                      "Run the model without and with the interventions", h.run)
    live_act = _action(win, "actionLive", "&Live", ["Ctrl+L"],
                       "Re-run on every change, also while a bound is dragged")
    live_act.setCheckable(True)
    live_act.toggled.connect(h.set_live)
    cancel_act = _action(win, "actionCancel", "&Cancel run", ["Esc"],
                         "Stop the run in progress at its next layer and drop any waiting run",
                         h.cancel)
    stats_act = _action(win, "actionStatsOnly", "&Statistics only", None,
                        "Keep only min/max/mean/std and histograms of captures, computed on the "
                        "device: the way to watch every layer of a large model")
    stats_act.setCheckable(True)
    stats_act.toggled.connect(h.set_stats_only)
    run_menu.addActions([run_act, live_act, cancel_act, stats_act])
    run_menu.addSeparator()
    device_menu = run_menu.addMenu("&Device")
    device_menu.setObjectName("menuDevice")
    group = QActionGroup(win)
    group.setExclusive(True)
    device_actions: dict[str, QAction] = {}
    for info in devices:
        act = QAction(info.label, win)
        act.setObjectName(f"actionDevice_{info.name.replace(':', '_')}")
        act.setCheckable(True)
        act.setEnabled(info.available)
        act.setData(info.name)
        if not info.available:
            act.setToolTip(info.reason)
            act.setStatusTip(f"{info.label} is not available: {info.reason}")
        group.addAction(act)
        device_menu.addAction(act)
        device_actions[info.name] = act
    device_menu.setToolTipsVisible(True)
    group.triggered.connect(lambda a: h.set_device(str(a.data())))

    view_menu = bar.addMenu("&View")
    view_menu.addActions(view_toggles)

    help_menu = bar.addMenu("&Help")
    about_act = _action(win, "actionAbout", "&About Hookscope", None, "", h.about)
    help_menu.addAction(about_act)

    # Shortcuts work with menus hidden too.
    win.addActions([run_act, live_act, open_act, undo_act, redo_act, save_ses])
    return Actions(open_act, quit_act, run_act, live_act, cancel_act, stats_act, about_act,
                   recent_menu, device_menu, group, device_actions, save_ses, open_ses,
                   undo_act, redo_act)
