"""View → Attention: each head's attention probabilities at the model's attention modules,
without | with | difference (:class:`~hookscope.widgets.attention_view.AttentionView`), in
a dock of the analysis tab group (hidden until asked for).

While the dock is shown, every run also computes the patterns of every attention module
Hookscope can read (``Session.set_derived("attention", ...)``, in the runner's thread like
the run itself); hidden, it costs nothing. A model without a readable attention module
gets a sentence in the dock, not a failed run.

A click on a head selects its attention module in the tree and aims the layer's
intervention at that head (``@heads=H``), through the tree model's ``setData`` like every
other edit (one undo step); a layer without an intervention gets ``zero@heads=H``, the
head ablated.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from PySide6.QtCore import QObject, Qt
from PySide6.QtWidgets import QLabel, QVBoxLayout, QWidget

from hookscope.core import At, HookscopeError, Intervention, RunResult, Zero
from hookscope.core.analyses import AttentionRequest, AttentionResult, attention_modules
from hookscope.core.session import ViewFailed
from hookscope.widgets.attention_view import AttentionView
from hookscope.widgets.layer_tree_model import COL_INTERVENTION
from hookscope.widgets.named import named

from .analysis_docks import analysis_dock

if TYPE_CHECKING:
    from .main_window import MainWindow

#: the grid's height that reads a few heads' maps and their token labels
WANTED_HEIGHT = 420


class AttentionTool(QObject):
    """The dock, its view and note, and what a shown dock asks of every run (a child of the
    window, ``attentionTool``)."""

    def __init__(self, win: "MainWindow") -> None:
        super().__init__(win)
        self.setObjectName("attentionTool")
        self.win = win
        self.view = AttentionView()
        self.note = named(QLabel(""), "attentionNote")
        self.note.setWordWrap(True)
        self.note.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        holder = QWidget()
        lay = QVBoxLayout(holder)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addWidget(self.note)
        lay.addWidget(self.view, 1)
        self.dock = analysis_dock(win, "Attention", "attentionDock", holder, "actionViewAttention",
                                  wanted_height=lambda: WANTED_HEIGHT)
        self.dock.visibilityChanged.connect(lambda _shown: self.ask())
        win.modelLoaded.connect(lambda _spec: self.ask(run=False))
        win.resultShown.connect(self.show)
        self.view.headClicked.connect(self.aim_at_head)

    def ask(self, run: bool = True) -> None:
        """Compute the patterns with every run while the dock is shown (and run once now)."""
        model = self.win.session.model
        request = None
        if self.dock.isVisible() and model is not None:
            layers = tuple(attention_modules(model.module))
            if layers:
                request = AttentionRequest(layers)
                self.note.setText("")
            else:
                self.view.show_result(None)
                self.note.setText("this model has no attention module whose probabilities "
                                  "Hookscope can recover (see README, attention patterns)")
        before = self.win.session.derived.get("attention")
        self.win.session.set_derived("attention", request)
        if run and request is not None and request != before and not self.win.is_live():
            self.win.request_run()

    def show(self, result: object) -> None:
        got = result.extras.get("attention") if isinstance(result, RunResult) else None
        if isinstance(got, AttentionResult):
            self.note.setText("")
            self.view.show_result(got)
        elif isinstance(got, ViewFailed):
            self.view.show_result(None)
            self.note.setText(got.message)
            self.win.show_error(got.message)

    def aim_at_head(self, layer: str, head: int) -> None:
        """Select ``layer`` in the tree and aim its intervention at ``head`` only."""
        win = self.win
        model = win.tree.model
        old = model.intervention(layer)
        iv: Intervention
        try:
            if old is None:
                iv = Zero(at=At(heads=(head,)))
            else:
                at = old.where() or At()
                iv = dataclasses.replace(old, at=dataclasses.replace(at, heads=(head,)))
        except HookscopeError as exc:
            win.show_error(str(exc))
            return
        index = model.index_for_path(layer, COL_INTERVENTION)
        if not index.isValid():
            win.show_error(f"{layer} is not a layer of this model's tree")
            return
        model.setData(index, iv, Qt.ItemDataRole.EditRole)
        # Selected as a click on its row would: the Intervention dock shows it, head picked.
        if win.tree.select_path(layer):
            win.tree.layerSelected.emit(layer)
        win.statusBar().showMessage(f"{layer}: {iv.name}{iv.at.suffix() if iv.at else ''}", 5000)


def install_attention_tool(win: "MainWindow") -> AttentionTool:
    """Add View → Attention and its dock (hidden until asked for) to ``win``."""
    return AttentionTool(win)
