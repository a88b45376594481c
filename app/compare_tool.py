"""File → Compare with… and View → Divergence: the window's model (model A, with the plan's
interventions) against another model, or itself with other weights, in another dtype or on
another device (model B), layer by layer.

The dialog builds a :class:`~hookscope.core.analyses.DiffRequest`; the session's runner
runs it after the comparison (off the GUI thread; model B is loaded or copied there) and
the result arrives with the run's (``result.extras["diff"]``). The Divergence dock draws
it (:class:`~hookscope.widgets.DivergenceView`); a click on a point selects that layer in
the tree.

While the comparison is open, the selected layer (a point clicked, or a row of the tree)
is shown as model A against model B: every run also computes a
:class:`~hookscope.core.analyses.LayerPairRequest` for it (a forward of each model
capturing that layer alone, the plan's interventions on both, in the runner's thread),
and the layer's panels show A and B the way they show a run without and with the
interventions (``SessionReactions`` hands the pairs to the activation panel). Model B is
built once and kept (:class:`~hookscope.core.analyses.ModelBCache`) until the comparison
closes (the dock's Close comparison, or another model), which returns the panels to
without/with.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from PySide6.QtCore import QTimer
from PySide6.QtGui import QAction
from PySide6.QtWidgets import (QComboBox, QDialog, QDialogButtonBox, QFileDialog, QFormLayout,
                               QHBoxLayout, QLineEdit, QPushButton, QWidget)

from hookscope.core import DiffRequest, DiffResult, HookscopeError, PlanError, RunResult
from hookscope.core.analyses import DEFAULT_TOLERANCE, LayerPairRequest, LayerPairs, ModelBCache
from hookscope.core.base import available_devices
from hookscope.core.session import ViewFailed
from hookscope.widgets import DivergenceView
from hookscope.widgets.named import named

from .analysis_docks import analysis_dock, show_dock
from .window_tools import insert_file_action

if TYPE_CHECKING:
    from .main_window import MainWindow

SAME = "as model A"
#: the plot's height that reads ten decades and the layer names (the dock may give less)
WANTED_HEIGHT = 340


class CompareDialog(QDialog):
    """What model B is: another spec (empty: this model), weights, a dtype, a device; and
    the tolerance."""

    def __init__(self, parent: QWidget) -> None:
        super().__init__(parent)
        self.setObjectName("compareDialog")
        self.setWindowTitle("Compare with…")
        self.spec = named(QLineEdit(), "compareSpec")
        self.spec.setPlaceholderText("empty: this model (demo:NAME, file.py:factory, hf:DIR…)")
        self.weights = named(QLineEdit(), "compareWeights")
        self.weights.setPlaceholderText("a state_dict (.pt, .safetensors) for model B")
        browse = named(QPushButton("Browse…"), "compareBrowse")
        browse.clicked.connect(self._browse)
        row = QHBoxLayout()
        row.addWidget(self.weights, 1)
        row.addWidget(browse)
        self.dtype = named(QComboBox(), "compareDtype")
        self.dtype.addItems([SAME, "bfloat16", "float16", "float64"])
        self.device = named(QComboBox(), "compareDevice")
        self.device.addItems([SAME, *(d.name for d in available_devices() if d.available)])
        self.tolerance = named(QLineEdit(f"{DEFAULT_TOLERANCE:g}"), "compareTolerance")
        form = QFormLayout(self)
        form.addRow("Model B", self.spec)
        form.addRow("Weights", row)
        form.addRow("Dtype", self.dtype)
        form.addRow("Device", self.device)
        form.addRow("Tolerance", self.tolerance)
        self.buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok
                                        | QDialogButtonBox.StandardButton.Cancel)
        self.buttons.setObjectName("compareButtons")
        self.buttons.accepted.connect(self.accept)
        self.buttons.rejected.connect(self.reject)
        form.addRow(self.buttons)

    def _browse(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Weights for model B", "",
                                              "State dicts (*.pt *.pth *.bin *.safetensors)")
        if path:
            self.weights.setText(path)

    def request(self) -> DiffRequest:
        """The analysis the fields say; a :class:`PlanError` saying what to fix otherwise."""
        text = self.tolerance.text().strip()
        try:
            tolerance = float(text)
        except ValueError:
            raise PlanError(f"tolerance {text!r}: give a relative change, e.g. "
                            f"{DEFAULT_TOLERANCE:g}") from None
        if not (math.isfinite(tolerance) and tolerance >= 0):
            raise PlanError(f"tolerance {text!r}: give a finite relative change of 0 or more")
        dtype, device = self.dtype.currentText(), self.device.currentText()
        return DiffRequest(b_spec=self.spec.text().strip() or None,
                           b_weights=self.weights.text().strip() or None,
                           b_dtype=None if dtype == SAME else dtype,
                           b_device=None if device == SAME else device, tolerance=tolerance)


class CompareTool:
    def __init__(self, win: "MainWindow") -> None:
        self.win = win
        self.result: DiffResult | None = None
        #: the comparison open (its model B), ``None`` when none is
        self.request: DiffRequest | None = None
        self._started: DiffRequest | None = None   # asked for, its result not in yet
        self.cache = ModelBCache()
        self.view = DivergenceView()
        self.dock = analysis_dock(win, "Divergence", "divergenceDock", self.view,
                                  "actionViewDivergence", wanted_height=lambda: WANTED_HEIGHT)
        self.view.layerChosen.connect(self.select_layer)
        self.view.closeRequested.connect(self.close)
        win.tree.layerSelected.connect(self.show_layer)
        win.modelLoaded.connect(lambda _spec: self.close())
        win.resultShown.connect(self.show)
        act = QAction("&Compare with…", win)
        act.setObjectName("actionCompareWith")
        act.setStatusTip("Run another model, or this one with other weights, dtype or device, "
                         "and compare every layer")
        act.triggered.connect(self.open_dialog)
        insert_file_action(win, act, "actionOpenInputs")
        self.action = act

    def open_dialog(self) -> CompareDialog:
        dlg = CompareDialog(self.win)
        dlg.accepted.connect(lambda: self.start_from(dlg))
        dlg.finished.connect(lambda _r: dlg.deleteLater())
        dlg.open()
        return dlg

    def start_from(self, dlg: CompareDialog) -> None:
        try:
            request = dlg.request()
        except HookscopeError as exc:
            self.win.show_error(str(exc))
            return
        self.start(request)

    def start(self, request: DiffRequest) -> None:
        """Run the comparison now, with model A as the window has it (plan included)."""
        s = self.win.session
        if s.model is None:
            self.win.show_error("open a model first, then compare it with another")
            return
        if s.submit_run(extra=(request,)) is None:
            self.win.show_error("a model is still loading: compare once it is open")
            return
        self._started = request
        self.win.statusBar().showMessage("comparing the two models layer by layer…", 5000)

    def show(self, result: object) -> None:
        if not isinstance(result, RunResult):
            return
        got = result.extras.get(DiffRequest.name)
        if isinstance(got, DiffResult):
            if self._started is not None and self._started != self.request:
                self._end_pairs()   # another model B: the old one's panels and copy go
                self.request = self._started
            self._started = None
            self.result = got
            self.view.show_result(got)
            show_dock(self.win, self.dock)
            first = got.first_divergent
            self.win.statusBar().showMessage(
                "every layer within the tolerance" if first is None else
                f"first past the tolerance: {first.path} (call {first.call})", 8000)
        elif isinstance(got, ViewFailed):
            self._started = None
            self.win.show_error(got.message)
        pairs = result.extras.get(LayerPairRequest.name)
        if isinstance(pairs, ViewFailed) and self.request is not None:
            self.win.show_error(f"model A against model B: {pairs.message}")
        elif isinstance(pairs, LayerPairs) and self.request is not None:
            for path in pairs.captures:
                # its panels in view (first of the column if not ticked), once the column
                # has fitted their heights (queued behind the panel's own fit)
                QTimer.singleShot(0, lambda p=path: self.win.panel.select(p))

    def select_layer(self, path: str, _call: int) -> None:
        """A point of the divergence plot clicked: its layer selected, and shown as A
        against B."""
        self.win.tree.select_path(path)
        self.win.panel.select(path)
        self.show_layer(path)

    def show_layer(self, path: str) -> None:
        """While a comparison is open, have every run show ``path`` as model A against model
        B (a run now, unless Live has started one)."""
        if self.request is None or not path:
            return
        rows = [r.path for r in self.result.layers] if self.result is not None else []
        if path in rows and self.view.chosen != rows.index(path):
            self.view.choose(rows.index(path))   # a tree row: its point ringed too
        s = self.win.session
        want = LayerPairRequest(self.request, (path,), s.model.spec if s.model else "model A",
                                self.cache)
        if s.derived.get(LayerPairRequest.name) == want:
            return
        s.set_derived(LayerPairRequest.name, want)
        if not s.options.live:   # Live has queued its run already
            s.submit_run()
        self.win.statusBar().showMessage(f"running model A and model B at {path}…", 5000)

    def close(self) -> None:
        """End the comparison: the Divergence dock hidden and emptied, model B let go, and
        the panels back to without/with."""
        self._started = None
        if self.request is None and self.result is None:
            return
        self.request = self.result = None
        self.view.show_result(None)
        self.dock.hide()
        self._end_pairs()

    def _end_pairs(self) -> None:
        s = self.win.session
        self.cache.clear()
        if s.derived.get(LayerPairRequest.name) is None:
            return
        s.set_derived(LayerPairRequest.name, None)
        last = self.win.last_result
        if last is not None:   # its without/with records, as they came (no run needed)
            self.win.panel.show_result(last)


def install_compare_tool(win: "MainWindow") -> CompareTool:
    """Add File → Compare with… and View → Divergence (hidden until a comparison) to ``win``."""
    tool = CompareTool(win)
    win.compare_tool = tool
    return tool
