"""File → Compare with… and View → Divergence: the window's model (model A, with the plan's
interventions) against another model, or itself with other weights, in another dtype or on
another device (model B), layer by layer.

The dialog builds a :class:`~hookscope.core.analyses.DiffRequest`; the session's runner
runs it after the comparison (off the GUI thread; model B is loaded or copied there) and
the result arrives with the run's (``result.extras["diff"]``). The Divergence dock draws
it (:class:`~hookscope.widgets.DivergenceView`); a click on a point selects that layer in
the tree.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from PySide6.QtGui import QAction
from PySide6.QtWidgets import (QComboBox, QDialog, QDialogButtonBox, QFileDialog, QFormLayout,
                               QHBoxLayout, QLineEdit, QPushButton, QWidget)

from hookscope.core import DiffRequest, DiffResult, HookscopeError, PlanError, RunResult
from hookscope.core.analyses import DEFAULT_TOLERANCE
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
        self.view = DivergenceView()
        self.dock = analysis_dock(win, "Divergence", "divergenceDock", self.view,
                                  "actionViewDivergence", wanted_height=lambda: WANTED_HEIGHT)
        self.view.layerChosen.connect(self.select_layer)
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
        self.win.statusBar().showMessage("comparing the two models layer by layer…", 5000)

    def show(self, result: object) -> None:
        got = result.extras.get("diff") if isinstance(result, RunResult) else None
        if isinstance(got, DiffResult):
            self.result = got
            self.view.show_result(got)
            show_dock(self.win, self.dock)
            first = got.first_divergent
            self.win.statusBar().showMessage(
                "every layer within the tolerance" if first is None else
                f"first past the tolerance: {first.path} (call {first.call})", 8000)
        elif isinstance(got, ViewFailed):
            self.win.show_error(got.message)

    def select_layer(self, path: str, _call: int) -> None:
        self.win.tree.select_path(path)


def install_compare_tool(win: "MainWindow") -> CompareTool:
    """Add File → Compare with… and View → Divergence (hidden until a comparison) to ``win``."""
    tool = CompareTool(win)
    win.compare_tool = tool
    return tool
