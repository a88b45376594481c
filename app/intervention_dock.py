"""The Intervention dock: the selected layer's intervention in full (widgets/intervention_panel).

Wiring only: the tree's selection picks the layer (its head count read from the
loaded module, :func:`hookscope.core.heads.head_site`), each run's result gives
the input's tokens and the layer's receipt, and every edit the panel makes is
written through the tree model's ``setData`` on the Intervention column, the
same path (and undo step per layer) as the tree's cell editor.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QDockWidget, QScrollArea

from hookscope.core import HookscopeError, RunResult, SessionEvent
from hookscope.core.plan import head_site
from hookscope.core.session import ModelChanged, PlanChanged
from hookscope.widgets.intervention_panel import InterventionPanel
from hookscope.widgets.layer_tree_model import COL_INTERVENTION

from .session_reactions import shown_input

if TYPE_CHECKING:
    from .main_window import MainWindow


def heads_of(win: "MainWindow", path: str) -> tuple[int | None, str]:
    """``(count, why not)``: the heads of layer ``path`` that Hookscope can split."""
    lm = win.session.model
    if lm is None or not path:
        return None, ""
    try:
        module = lm.module.get_submodule(path)
    except AttributeError:
        return None, ""
    try:
        return head_site(module, path).n_heads, ""
    except HookscopeError as exc:
        return None, str(exc).split(";")[0]


def install_intervention_dock(win: "MainWindow") -> None:
    """Add the Intervention dock (``interventionDock``) and View → Intervention."""
    panel = InterventionPanel()
    scroll = QScrollArea()
    scroll.setWidgetResizable(True)
    scroll.setFrameShape(QScrollArea.Shape.NoFrame)
    scroll.setWidget(panel)
    dock = QDockWidget("Intervention", win)
    dock.setObjectName("interventionDock")
    dock.setWidget(scroll)
    win.addDockWidget(Qt.DockWidgetArea.RightDockWidgetArea, dock)
    win.intervention_panel, win.intervention_dock = panel, dock
    toggle = dock.toggleViewAction()
    toggle.setObjectName("actionViewIntervention")
    for act in win.menuBar().actions():
        menu = act.menu()
        if menu is not None and act.text().replace("&", "") == "View":
            menu.addAction(toggle)  # type: ignore[attr-defined]

    model = win.tree.model

    def select(path: str) -> None:
        n, why = heads_of(win, path)
        panel.set_layer(path, model.intervention(path), n, why)
        show_result(win.last_result)

    def edited(path: str, iv: object) -> None:
        index = model.index_for_path(path, COL_INTERVENTION)
        if index.isValid() and index.data(Qt.ItemDataRole.EditRole) != iv:
            model.setData(index, iv, Qt.ItemDataRole.EditRole)

    def show_result(result: RunResult | None) -> None:
        if result is None:
            return
        lm = win.session.model
        panel.set_tokens(shown_input(result, lm.meaning if lm else None)[1])
        receipt = result.receipts.get(panel.path())
        panel.show_receipt(receipt.line() if receipt is not None else None)

    def on_event(ev: SessionEvent) -> None:
        if isinstance(ev, PlanChanged) and panel.path():
            panel.show_intervention(ev.plan.all_interventions().get(panel.path()))
        elif isinstance(ev, ModelChanged):
            panel.set_layer("", None)

    win.tree.layerSelected.connect(select)
    panel.edited.connect(edited)
    panel.errorOccurred.connect(win.show_error)
    win.resultShown.connect(show_result)
    unsubscribe = win.session.subscribe(on_event)
    dock.destroyed.connect(lambda *_: unsubscribe())
