"""The main window: layer tree (left), activations (centre), before/after (right).

This file is the wiring. The widgets show core data; the worker thread
loads models and runs forwards; the window turns user actions into requests
and routes every answer from the worker (one place: the ``_on_*`` slots) to
the views. Nothing here calls into a torch module.
"""

from __future__ import annotations

import dataclasses
import importlib.metadata

import torch
from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtGui import QCloseEvent
from PySide6.QtWidgets import (QDialog, QDockWidget, QLabel, QMainWindow, QMessageBox, QToolBar,
                               QVBoxLayout, QWidget)

from hookscope.core import LoadedModel, Plan, PlanError, RunResult, TreeNode
from hookscope.core.outputs import input_token_strings, inputs_for_display
from hookscope.core.path_patterns import expand_plan
from hookscope.widgets.activation_panel import ActivationPanel
from hookscope.widgets.layer_tree_view import LayerTreeWidget
from hookscope.widgets.output_comparison import OutputComparison

from .demo_setup import note_for
from .error_banner import ErrorBanner
from .menus import build_menus
from .open_dialog import OpenModelDialog
from .qt_compat import guard_none_refcount
from .recent import RecentModels
from .run_bar import RunBar
from .status import StatusFields
from .worker import ForwardWorker, Loaded

guard_none_refcount()  # before any Qt call of the app (PySide6 6.12.0 on Python 3.11)


def app_version() -> str:
    try:
        return importlib.metadata.version("hookscope")
    except importlib.metadata.PackageNotFoundError:  # running from a bare checkout
        return "(not installed)"


class MainWindow(QMainWindow):
    """Hookscope's window. Scripting API: :meth:`load`, :meth:`request_run`,
    :meth:`set_live`, :attr:`last_result`, :attr:`worker`, :meth:`error_text`.

    Signals: ``modelLoaded(str)`` (spec), ``resultShown(object)`` (RunResult),
    ``errorShown(str)``.
    """

    modelLoaded = Signal(str)
    resultShown = Signal(object)
    errorShown = Signal(str)

    def __init__(self, recent: RecentModels | None = None, stats_only: bool = False) -> None:
        super().__init__()
        self.setObjectName("mainWindow")
        self.setWindowTitle("Hookscope")
        self.stats_only = stats_only
        self.train_mode = False  # --train: models run in train mode (loaded in eval)
        self.recent = recent or RecentModels()
        self.loaded: LoadedModel | None = None
        self.last_result: RunResult | None = None
        self._load_id: int | None = None       # load in flight
        self._load_setup: tuple[Plan | None, str | None] = (None, None)
        self._valid_from = 0                   # results of older ids belong to a replaced model
        self._observed_key: tuple | None = None    # (model, input) whose shapes the tree shows
        self._observe_keys: dict[int, tuple] = {}
        self._run_after_load = False
        self._last_run_id: int | None = None
        self._closing = False
        self._sticky_error = False
        self._sized = False

        self.worker = ForwardWorker(self)
        # A zero-delay timer folds the several changes one user action makes
        # (a parent tick that ticks its children, a drag step) into one request.
        self._live_timer = QTimer(self, singleShot=True, interval=0)
        self._live_timer.timeout.connect(self.request_run)
        self._build_ui()
        self.actions_ = build_menus(self)
        self._wire()

    # -- layout ----------------------------------------------------------------
    def _build_ui(self) -> None:
        self.run_bar = RunBar(parent=self)
        self.run_toolbar = QToolBar("Run bar", self, objectName="runToolbar")
        self.run_toolbar.setMovable(False)
        self.run_toolbar.addWidget(self.run_bar)
        self.addToolBar(Qt.ToolBarArea.TopToolBarArea, self.run_toolbar)

        self.tree = LayerTreeWidget()
        self.layer_dock = QDockWidget("Layers", self, objectName="layerDock")
        self.layer_dock.setWidget(self.tree)
        self.addDockWidget(Qt.DockWidgetArea.LeftDockWidgetArea, self.layer_dock)

        self.outputs = OutputComparison()
        self.output_dock = QDockWidget("Output: without / with", self, objectName="outputDock")
        self.output_dock.setWidget(self.outputs)
        self.addDockWidget(Qt.DockWidgetArea.RightDockWidgetArea, self.output_dock)

        centre = QWidget(objectName="centre")
        lay = QVBoxLayout(centre)
        lay.setContentsMargins(4, 4, 4, 4)
        self.banner = ErrorBanner(centre)
        self.note = QLabel(objectName="modelNote")
        self.note.setWordWrap(True)
        self.note.setTextFormat(Qt.TextFormat.RichText)
        self.note.setStyleSheet("#modelNote { background: #eef4fb; border: 1px solid #c5d7ec; "
                                "border-radius: 3px; padding: 6px; }")
        self.note.hide()
        self.panel = ActivationPanel()
        lay.addWidget(self.banner)
        lay.addWidget(self.note)
        lay.addWidget(self.panel, 1)
        self.setCentralWidget(centre)
        self.status = StatusFields(self.statusBar())

    def _wire(self) -> None:
        w = self.worker
        w.loaded.connect(self._on_loaded)
        w.observed.connect(self._on_observed)
        w.finished.connect(self._on_result)
        w.failed.connect(self._on_failed)
        w.cancelled.connect(self._on_cancelled)
        w.started.connect(lambda _rid: self.status.show_busy(True))

        self.run_bar.runRequested.connect(self.request_run)
        self.run_bar.liveToggled.connect(self._on_live_toggled)
        self.run_bar.deviceChanged.connect(self._on_device_changed)

        model = self.tree.model
        model.planChanged.connect(self._on_plan_changed)
        model.errorOccurred.connect(lambda msg: self.show_error(msg))
        self.tree.layerSelected.connect(self.panel.select)
        self.panel.clampDragged.connect(self._on_clamp_dragged)
        self.panel.clampEdited.connect(self._on_clamp_dragged)
        self.banner.closed.connect(lambda: setattr(self, "_sticky_error", False))
        self._on_device_changed(self.run_bar.device())

    # -- scripting API -----------------------------------------------------------
    def load(self, spec: str, weights: str | None = None, input_text: str | None = None,
             plan: Plan | None = None, trust_pickle: bool = False) -> int:
        """Load a model on the worker; when it arrives, apply ``plan`` and run once.

        A failed load leaves the current model, plan and plots as they were.
        """
        self._load_id = self.worker.submit_load(spec, weights, trust_pickle)
        self._load_setup = (plan, input_text)
        self._load_args = (spec, weights)
        self._run_after_load = True
        self.status.show_busy(True)
        return self._load_id

    def request_run(self) -> int | None:
        """Queue a comparison with the current plan, input and device; returns the request id."""
        self._live_timer.stop()
        if self._closing:
            return None
        if self.loaded is None:
            self._run_after_load = self._load_id is not None
            if self._load_id is None:
                self.show_error("no model is open: use File → Open model…")
            return None
        text = self.run_bar.input_text()
        key = (self._valid_from, text)  # (which load, which input) the shapes belong to
        plan = self.current_plan()
        # In Live mode a newer change makes the run in flight stale: let it stop early.
        self._last_run_id = self.worker.submit_run(
            self.loaded.module, text, self.loaded.example_input, plan, self.run_bar.device(),
            observe_tree=key != self._observed_key, cancellable=self.is_live())
        if key != self._observed_key:
            self._observe_keys[self._last_run_id] = key
        self.status.show_busy(True)
        return self._last_run_id

    def current_plan(self) -> Plan:
        plan = self.tree.model.plan()
        return dataclasses.replace(plan, keep_tensors=not self.stats_only)

    def set_stats_only(self, on: bool) -> None:
        """Statistics-only captures (no tensors kept); re-runs at once in Live mode."""
        if on == self.stats_only:
            return
        self.stats_only = on
        self.actions_.stats_only.setChecked(on)
        if self.is_live() and self.loaded is not None:
            self._live_timer.start()

    def set_live(self, on: bool) -> None:
        """Live mode: every plan change (and every step of a drag) re-runs."""
        self.run_bar.set_live(on)  # emits liveToggled -> _on_live_toggled

    def is_live(self) -> bool:
        return self.run_bar.is_live()

    def cancel_pending(self) -> bool:
        return self.worker.cancel()

    def error_text(self) -> str:
        return self.banner.text()

    def show_error(self, message: str, sticky: bool = False) -> None:
        """Show ``message`` in the banner. A non-sticky one goes at the next good
        result; a sticky one (a command-line mistake) stays until closed."""
        if self._sticky_error and not self.banner.isHidden():
            message = f"{self.banner.text()}\n{message}"
            sticky = True
        self._sticky_error = sticky
        self.banner.show_error(message)
        self.errorShown.emit(message)

    def _clear_transient_error(self) -> None:
        if not self._sticky_error:
            self.banner.dismiss()

    def is_idle(self) -> bool:
        """No load or run in flight or queued (for --screenshot and scripts)."""
        return (self._load_id is None and not self.worker.busy and not self._live_timer.isActive())

    # -- user actions ----------------------------------------------------------
    def open_model_dialog(self) -> None:
        dlg = OpenModelDialog(self, spec=self.loaded.spec if self.loaded else "",
                              weights=self.loaded.weights if self.loaded else None)
        if dlg.exec() == QDialog.DialogCode.Accepted and dlg.spec():
            self.load(dlg.spec(), dlg.weights(), trust_pickle=dlg.trust_pickle())

    def fill_recent_menu(self) -> None:
        menu = self.actions_.recent_menu
        menu.clear()
        items = self.recent.items()
        for spec, weights in items:
            label = spec if not weights else f"{spec}  (weights {weights})"
            act = menu.addAction(label)
            act.triggered.connect(lambda _=False, s=spec, w=weights: self.load(s, w))
        if not items:
            menu.addAction("(none yet)").setEnabled(False)
        else:
            menu.addSeparator()
            menu.addAction("Clear list").triggered.connect(self.recent.clear)

    def show_about(self) -> None:
        QMessageBox.about(self, "About Hookscope",
                          f"<b>Hookscope {app_version()}</b> — an activation explorer for "
                          f"PyTorch (torch {torch.__version__}).<br>"
                          "Capture layer outputs, clamp them, and compare the model's output "
                          "without and with the intervention, live.")

    # -- reactions ---------------------------------------------------------------
    def _on_live_toggled(self, on: bool) -> None:
        act = self.actions_.live
        if act.isChecked() != on:
            act.setChecked(on)
        if on:
            self.request_run()

    def _on_device_changed(self, name: str) -> None:
        act = getattr(self, "actions_", None) and self.actions_.device_actions.get(name)
        if act and not act.isChecked():
            act.setChecked(True)
        if self.loaded is not None and self.is_live():
            self._live_timer.start()

    def _on_plan_changed(self, plan: object = None) -> None:
        self._sync_clamp_lines()
        if self.is_live() and self.loaded is not None:
            self._live_timer.start()
        elif self.last_result is not None:
            # The plots still show the last run: say so until the next one.
            self.statusBar().showMessage("settings changed: the plots show the last run; "
                                         "press Run (Ctrl+R) or turn on Live (Ctrl+L)")

    def _on_clamp_dragged(self, path: str, lo: float, hi: float) -> None:
        self.tree.model.set_clamp(path, lo, hi)
        if self.is_live() and self.loaded is not None:
            self._live_timer.start()

    # -- answers from the worker (the one place results arrive) -----------------
    def _on_loaded(self, rid: int, payload: Loaded) -> None:
        if rid != self._load_id or self._closing:
            return
        self._load_id = None
        self._valid_from = rid
        self.loaded = payload.model
        self.loaded.module.train(self.train_mode)  # no run is in flight: the load just finished
        self._observed_key = None
        plan, input_text = self._load_setup
        self.tree.model.set_tree(payload.tree)
        try:  # wildcards of the command line (--capture 'h.*.mlp') to this model's paths
            plan = expand_plan(plan, payload.model.module) if plan else plan
        except PlanError as exc:
            self.show_error(str(exc))
            plan = None
        self.tree.model.set_plan(plan or Plan())
        has_example = payload.model.example_input is not None
        self.run_bar.set_input_text(input_text or ("example" if has_example else ""))
        self.run_bar.set_no_example_hint(not has_example)
        self.last_result = None
        w = self.worker
        self.status.reset(w.runs_done, w.runs_dropped, w.runs_failed)
        self.panel.clear()      # the old model's panels mean nothing for the new one
        self.outputs.clear()
        note = note_for(payload.model.spec, payload.model.description)
        self.note.setText(note)
        self.note.setVisible(bool(note))
        self.setWindowTitle(f"Hookscope — {payload.model.spec}")
        self.recent.add(*self._load_args)
        self._clear_transient_error()
        self.modelLoaded.emit(payload.model.spec)
        self._sync_clamp_lines()
        if self._run_after_load:
            self._run_after_load = False
            self.request_run()

    def _on_observed(self, rid: int, tree: TreeNode) -> None:
        if rid < self._valid_from or self._closing:
            return
        key = self._observe_keys.pop(rid, None)
        if key is not None:
            self._observed_key = key
        self.tree.model.update_observed(tree)

    def _on_result(self, rid: int, result: RunResult) -> None:
        if rid < self._valid_from or self._closing:
            return
        self.last_result = result
        lm = self.loaded  # the output by meaning, with the input's tokens where cheap to know
        shown_input = inputs_for_display(self.run_bar.input_text(), lm.example_input,
                                         lm.meaning.codec) if lm else None
        self.panel.set_token_labels(input_token_strings(shown_input, lm.meaning if lm else None))
        self.panel.show_result(result)
        self.outputs.show_result(result, lm.meaning if lm else None, shown_input)
        self._sync_clamp_lines()
        self.status.show_result(result)
        self._show_counts()
        if self.is_idle():
            self.status.show_busy(False)
        self._clear_transient_error()
        self.resultShown.emit(result)

    def _on_failed(self, rid: int, message: str) -> None:
        if self._closing:
            return
        if rid == self._load_id:
            self._load_id = None
            self._run_after_load = False
            self.show_error(f"could not open the model: {message}")
        elif rid >= self._valid_from:
            if self.last_result is not None:
                message += "\n(The plots still show the last successful run.)"
            self.show_error(message)
        self._show_counts()
        if self.is_idle():
            self.status.show_busy(False)

    def _on_cancelled(self, rid: int) -> None:
        if self._closing:
            return
        self._show_counts()
        if self.is_idle():
            self.status.show_busy(False)
            self.statusBar().showMessage("run cancelled", 3000)

    def _show_counts(self) -> None:
        w = self.worker
        self.status.show_counts(w.runs_done, w.runs_dropped, w.runs_failed)

    def _sync_clamp_lines(self) -> None:
        """Draw the current plan's bounds (not the last result's: a drag may be ahead of it)."""
        clamp = self.tree.model.plan().clamp
        panels = self.panel.panels()
        for path in {p for p, _call in panels}:
            if path in clamp:
                lo, hi = clamp[path]
                self.panel.set_clamp_lines(path, lo, hi)
            else:
                self.panel.set_clamp_lines(path, None, None)

    # -- sizes -------------------------------------------------------------------
    def showEvent(self, event) -> None:  # noqa: N802 - Qt override
        super().showEvent(event)
        if not self._sized:
            self._sized = True
            self.fit_docks()

    def resizeEvent(self, event) -> None:  # noqa: N802 - Qt override
        super().resizeEvent(event)
        if self._sized and event.oldSize().width() <= 0:
            self.fit_docks()

    def fit_docks(self) -> None:
        """Give the tree room for its clamp columns and the plots the middle."""
        w = max(self.width(), 900)
        self.resizeDocks([self.layer_dock, self.output_dock],
                         [int(w * 0.32), int(w * 0.24)], Qt.Orientation.Horizontal)

    # -- closing -----------------------------------------------------------------
    def closeEvent(self, event: QCloseEvent) -> None:  # noqa: N802 - Qt override
        self.hide()  # gone at once for the user; the run in flight stops at its next layer
        self.shutdown()
        super().closeEvent(event)

    def shutdown(self) -> None:
        """Drop queued work, stop the forward in flight at its next layer and wait; idempotent."""
        self._closing = True
        self._live_timer.stop()
        self.worker.shutdown()
