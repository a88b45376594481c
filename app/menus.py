"""The main window's menus and their actions (File, Run, View, Help).

Built here so that main_window.py holds wiring, not menu plumbing. Every
action has an objectName (``actionRun``, ``actionLive``, ...) for scripts.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from PySide6.QtGui import QAction, QActionGroup, QKeySequence
from PySide6.QtWidgets import QMenu

from hookscope.core import demo_names
from hookscope.core.demo_models import DEMO_DESCRIPTIONS

from .demo_setup import default_plan
from .export_actions import export_captures, export_script

if TYPE_CHECKING:
    from .main_window import MainWindow


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


def _action(win: "MainWindow", name: str, text: str, shortcuts: list | None = None,
            tip: str = "") -> QAction:
    act = QAction(text, win)
    act.setObjectName(name)
    if shortcuts:
        act.setShortcuts([QKeySequence(s) for s in shortcuts])
    if tip:
        act.setStatusTip(tip)
        act.setToolTip(tip)
    return act


def build_menus(win: "MainWindow") -> Actions:
    bar = win.menuBar()

    file_menu = bar.addMenu("&File")
    open_act = _action(win, "actionOpen", "&Open model…", [QKeySequence.StandardKey.Open],
                       "Open a demo, a Python factory, or a torch.export .pt2 program")
    open_act.triggered.connect(win.open_model_dialog)
    file_menu.addAction(open_act)
    demo_menu = file_menu.addMenu("Open &demo")
    demo_menu.setObjectName("menuDemo")
    demo_menu.setToolTipsVisible(True)
    for name in demo_names():
        act = demo_menu.addAction(f"demo:{name}")
        act.setObjectName(f"actionDemo_{name}")
        act.setToolTip(DEMO_DESCRIPTIONS.get(name, ""))
        act.triggered.connect(lambda _=False, n=name: win.load(f"demo:{n}", plan=default_plan(f"demo:{n}")))
    recent_menu = file_menu.addMenu("Open &recent")
    recent_menu.setObjectName("menuRecent")
    recent_menu.aboutToShow.connect(win.fill_recent_menu)
    file_menu.addSeparator()
    export_caps = _action(win, "actionExportCaptures", "&Export captures…", ["Ctrl+E"],
                          "Save the captured tensors to .npz or .safetensors")
    export_caps.triggered.connect(lambda: export_captures(win))
    export_py = _action(win, "actionExportScript", "Export as PyTorch &script…", None,
                        "Write this setup as a plain-PyTorch script with the hooks spelled out")
    export_py.triggered.connect(lambda: export_script(win))
    file_menu.addActions([export_caps, export_py])
    file_menu.addSeparator()
    quit_act = _action(win, "actionQuit", "&Quit", [QKeySequence.StandardKey.Quit])
    quit_act.triggered.connect(win.close)
    file_menu.addAction(quit_act)

    run_menu = bar.addMenu("&Run")
    run_act = _action(win, "actionRun", "&Run", ["Ctrl+R", "F5"],
                      "Run the model without and with the interventions")
    run_act.triggered.connect(win.request_run)
    live_act = _action(win, "actionLive", "&Live", ["Ctrl+L"],
                       "Re-run on every change, also while a bound is dragged")
    live_act.setCheckable(True)
    live_act.toggled.connect(win.set_live)
    cancel_act = _action(win, "actionCancel", "&Cancel run", ["Esc"],
                         "Stop the run in progress at its next layer and drop any waiting run")
    cancel_act.triggered.connect(win.cancel_pending)
    stats_act = _action(win, "actionStatsOnly", "&Statistics only", None,
                        "Keep only min/max/mean/std and histograms of captures, computed on the "
                        "device: the way to watch every layer of a large model")
    stats_act.setCheckable(True)
    stats_act.setChecked(win.stats_only)
    stats_act.toggled.connect(win.set_stats_only)
    run_menu.addActions([run_act, live_act, cancel_act, stats_act])
    run_menu.addSeparator()
    device_menu = run_menu.addMenu("&Device")
    device_menu.setObjectName("menuDevice")
    group = QActionGroup(win)
    group.setExclusive(True)
    device_actions: dict[str, QAction] = {}
    for info in win.run_bar.devices:
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
    group.triggered.connect(lambda a: win.run_bar.set_device(str(a.data())))

    view_menu = bar.addMenu("&View")
    for dock in (win.layer_dock, win.output_dock):
        view_menu.addAction(dock.toggleViewAction())
    view_menu.addAction(win.run_toolbar.toggleViewAction())

    help_menu = bar.addMenu("&Help")
    about_act = _action(win, "actionAbout", "&About Hookscope")
    about_act.triggered.connect(win.show_about)
    help_menu.addAction(about_act)

    win.addActions([run_act, live_act, open_act])  # shortcuts work with menus hidden too
    return Actions(open_act, quit_act, run_act, live_act, cancel_act, stats_act, about_act,
                   recent_menu,
                   device_menu, group, device_actions)
