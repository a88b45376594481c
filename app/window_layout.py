"""The main window's parts and where they sit: run bar on top, layer tree left,
activations in the centre (under the error banner and the model's note), the
before/after output right, status fields at the bottom.

Kept apart from main_window.py, which is wiring; every part reads and writes
the session it is given.
"""

from __future__ import annotations

from dataclasses import dataclass

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QDockWidget, QLabel, QMainWindow, QToolBar, QVBoxLayout, QWidget

from hookscope.core import Session
from hookscope.widgets.activation_panel import ActivationPanel
from hookscope.widgets.layer_tree_model import LayerTreeModel
from hookscope.widgets.layer_tree_view import LayerTreeWidget
from hookscope.widgets.output_comparison import OutputComparison

from .error_banner import ErrorBanner
from .run_bar import RunBar
from .status import StatusFields

NOTE_STYLE = ("#modelNote { background: #eef4fb; border: 1px solid #c5d7ec; "
              "border-radius: 3px; padding: 6px; }")


@dataclass
class Parts:
    run_bar: RunBar
    run_toolbar: QToolBar
    tree: LayerTreeWidget
    layer_dock: QDockWidget
    outputs: OutputComparison
    output_dock: QDockWidget
    banner: ErrorBanner
    note: QLabel
    panel: ActivationPanel
    status: StatusFields


def build_parts(win: QMainWindow, session: Session) -> Parts:
    run_bar = RunBar(parent=win)
    run_toolbar = QToolBar("Run bar", win, objectName="runToolbar")  # type: ignore[call-overload]  # stubs omit Qt-property kwargs
    run_toolbar.setMovable(False)
    run_toolbar.addWidget(run_bar)
    win.addToolBar(Qt.ToolBarArea.TopToolBarArea, run_toolbar)
    tree = LayerTreeWidget(LayerTreeModel(session=session))
    layer_dock = QDockWidget("Layers", win, objectName="layerDock")  # type: ignore[call-overload]  # stubs omit Qt-property kwargs
    layer_dock.setWidget(tree)
    win.addDockWidget(Qt.DockWidgetArea.LeftDockWidgetArea, layer_dock)
    outputs = OutputComparison()
    output_dock = QDockWidget("Output: without / with", win, objectName="outputDock")  # type: ignore[call-overload]  # stubs omit Qt-property kwargs
    output_dock.setWidget(outputs)
    win.addDockWidget(Qt.DockWidgetArea.RightDockWidgetArea, output_dock)
    centre = QWidget(objectName="centre")  # type: ignore[call-arg]  # stubs omit Qt-property kwargs
    lay = QVBoxLayout(centre)
    lay.setContentsMargins(4, 4, 4, 4)
    banner = ErrorBanner(centre)
    note = QLabel(objectName="modelNote")  # type: ignore[call-overload]  # stubs omit Qt-property kwargs
    note.setWordWrap(True)
    note.setTextFormat(Qt.TextFormat.RichText)
    note.setStyleSheet(NOTE_STYLE)
    note.hide()
    panel = ActivationPanel(session=session)   # its bound lines edit the session's plan
    for w, stretch in ((banner, 0), (note, 0), (panel, 1)):
        lay.addWidget(w, stretch)
    win.setCentralWidget(centre)
    return Parts(run_bar, run_toolbar, tree, layer_dock, outputs, output_dock, banner, note,
                 panel, StatusFields(win.statusBar()))
