"""How the main window follows its session: one handler per session event.

:class:`SessionReactions` is a mixin of :class:`~hookscope.app.main_window.MainWindow`
(kept in its own file so that main_window.py holds the building and wiring).
Every session event reaches :meth:`SessionReactions._on_event` on the GUI
thread, the one place answers arrive, which hands it to the handler of its type
(:data:`REACTIONS`); that handler redraws the parts that show it:
no widget keeps its own copy of a bound, the device, Live or statistics-only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, ClassVar

from hookscope.core import SessionEvent
from hookscope.core.session import (DeviceChanged, Idle, InputChanged, LoadFailed, LoadWarning,
                                    ModelChanged, OptionsChanged, PlanChanged, ResultArrived,
                                    RunCancelled, RunFailed, RunProgress, RunStarted)
from hookscope.core.views import input_token_strings, inputs_for_display
from hookscope.core.model import is_live

from .demo_setup import note_for

if TYPE_CHECKING:
    from PySide6.QtCore import Signal
    from PySide6.QtWidgets import QLabel, QMainWindow

    from hookscope.core import RunResult, Session
    from hookscope.widgets.activation_panel import ActivationPanel
    from hookscope.widgets.layer_tree_view import LayerTreeWidget
    from hookscope.widgets.output_comparison import OutputComparison

    from .error_banner import ErrorBanner
    from .menus import Actions
    from .recent import RecentModels
    from .run_bar import RunBar
    from .status import StatusFields
    from .worker import ForwardWorker

    _WindowBase = QMainWindow  # for the checker: the mixin only ever lives in a QMainWindow
else:
    _WindowBase = object


class SessionReactions(_WindowBase):
    """Session event handlers, one per event type; the window provides the parts they draw on."""

    if TYPE_CHECKING:  # what MainWindow provides (main_window.py builds them)
        modelLoaded: ClassVar[Signal]
        resultShown: ClassVar[Signal]
        idle: ClassVar[Signal]
        session: Session
        worker: ForwardWorker
        recent: RecentModels
        run_bar: RunBar
        tree: LayerTreeWidget
        outputs: OutputComparison
        banner: ErrorBanner
        note: QLabel
        panel: ActivationPanel
        status: StatusFields
        actions_: Actions
        _sticky_error: bool

        @property
        def last_result(self) -> RunResult | None: ...
        def show_error(self, message: str, sticky: bool = False) -> None: ...
        def is_live(self) -> bool: ...
        def is_idle(self) -> bool: ...

    # -- the one place session events arrive (GUI thread) -------------------------
    def _on_event(self, ev: SessionEvent) -> None:
        handler = REACTIONS.get(type(ev))
        if handler is not None:
            handler(self, ev)

    def _on_model(self, ev: ModelChanged) -> None:
        lm, s = ev.model, self.session
        self.run_bar.set_input_text(s.input_text)
        self.run_bar.set_no_example_hint(lm.example_input is None)
        self.status.reset(self.worker.runs_done, self.worker.runs_dropped, self.worker.runs_failed)
        self.panel.clear()      # the old model's panels mean nothing for the new one
        self.panel.view_choices = s.view.setdefault("layer_views", {})   # kept in session files
        self.outputs.clear()
        note = note_for(lm.spec, lm.description)
        self.note.setText(note)
        self.note.setVisible(bool(note))
        self.setWindowTitle(f"Hookscope — {lm.spec}")
        if not is_live(lm):  # a model of a Python session cannot be reopened from the menu
            self.recent.add(lm.spec, lm.weights)
        self._clear_transient_error()
        self.modelLoaded.emit(lm.spec)
        if s.view.get("selected"):
            self.tree.select_path(s.view["selected"])

    def _on_load_warning(self, ev: LoadWarning) -> None:
        # What the load left out (a layer the model lacks, a device it cannot use)
        # stays until closed: the first run's success must not hide it.
        self.show_error(ev.message, sticky=True)

    def _on_load_failed(self, ev: LoadFailed) -> None:
        self.show_error(f"could not open the model: {ev.message}")

    def _on_plan(self, ev: PlanChanged) -> None:
        self._sync_clamp_lines()
        self._show_undo()
        if not self.is_live() and self.last_result is not None:
            self.statusBar().showMessage("settings changed: the plots show the last run; "
                                         "press Run (Ctrl+R) or turn on Live (Ctrl+L)")

    def _on_input(self, ev: InputChanged) -> None:
        if self.run_bar.input_text() != ev.text:
            self.run_bar.set_input_text(ev.text)

    def _on_device(self, ev: DeviceChanged) -> None:
        self.run_bar.set_device(ev.device)
        act = self.actions_.device_actions.get(ev.device)
        if act is not None and not act.isChecked():
            act.setChecked(True)

    def _on_options(self, ev: OptionsChanged) -> None:
        self._show_options()

    def _on_started(self, ev: RunStarted) -> None:
        self._cancelled = False
        self.status.show_busy(True)
        self.run_bar.start_progress()

    def _on_progress(self, ev: RunProgress) -> None:
        p = ev.progress
        self.run_bar.show_progress(p.done, p.total, p.elapsed_s)

    def _on_result(self, ev: ResultArrived) -> None:
        result = ev.result
        lm = self.session.model  # the output by meaning, with the input's tokens where cheap to know
        shown = (inputs_for_display(self.session.input_text, lm.example_input, lm.meaning.codec)
                 if lm is not None and result.inputs is None else result.inputs)  # Ray: the tokens
        self.panel.set_token_labels(input_token_strings(shown, lm.meaning if lm else None))
        self.panel.show_result(result)
        self.outputs.show_result(result, lm.meaning if lm else None, shown)
        self._sync_clamp_lines()
        self.status.show_result(result)
        self._clear_transient_error()
        if result.alarms:  # an intervention that may have done nothing must not pass unseen
            self.show_error("intervention alarm: " + "; ".join(result.alarms))
        self.resultShown.emit(result)

    def _on_error(self, ev: RunFailed) -> None:
        extra = "\n(The plots still show the last successful run.)" if self.last_result else ""
        self.show_error(f"{ev.message}{extra}")

    def _on_cancelled(self, ev: RunCancelled) -> None:
        self._cancelled = True
        self.run_bar.hide_progress("cancelled")
        self.status.show_cancelled()

    def _on_idle(self, ev: Idle) -> None:
        self.run_bar.hide_progress("cancelled" if self._cancelled else "")
        w = self.worker
        self.status.show_counts(w.runs_done, w.runs_dropped, w.runs_failed)
        if self.is_idle():
            self.status.show_busy(False)
            self.idle.emit()

    # -- reactions ---------------------------------------------------------------
    def _on_clamp_edited(self, path: str, lo: float, hi: float) -> None:
        self.tree.model.set_clamp(path, lo, hi, merge=path)
        self.session.seal()  # the drag is over: the next edit is a new undo step

    def _show_options(self) -> None:
        o, a = self.session.options, self.actions_
        for widget, on in ((a.live, o.live), (a.stats_only, o.stats_only)):
            if widget.isChecked() != on:
                widget.setChecked(on)
        self.run_bar.set_live(o.live)

    def _show_undo(self) -> None:
        assert self.actions_.undo is not None and self.actions_.redo is not None  # build_menus sets both
        self.actions_.undo.setEnabled(self.session.can_undo)
        self.actions_.redo.setEnabled(self.session.can_redo)

    def _clear_transient_error(self) -> None:
        if not self._sticky_error:
            self.banner.dismiss()

    def _sync_clamp_lines(self) -> None:
        """Draw the current plan's bounds (not the last result's: a drag may be ahead of it)."""
        clamp = self.session.plan.clamp
        for path in {p for p, _call in self.panel.panels()}:
            self.panel.set_clamp_lines(path, *clamp.get(path, (None, None)))


#: The handler of each session event type (the types without one need no redraw here).
REACTIONS: dict[type[SessionEvent], Callable[[SessionReactions, Any], None]] = {
    ModelChanged: SessionReactions._on_model,
    LoadWarning: SessionReactions._on_load_warning,
    LoadFailed: SessionReactions._on_load_failed,
    PlanChanged: SessionReactions._on_plan,
    InputChanged: SessionReactions._on_input,
    DeviceChanged: SessionReactions._on_device,
    OptionsChanged: SessionReactions._on_options,
    RunStarted: SessionReactions._on_started,
    RunProgress: SessionReactions._on_progress,
    ResultArrived: SessionReactions._on_result,
    RunFailed: SessionReactions._on_error,
    RunCancelled: SessionReactions._on_cancelled,
    Idle: SessionReactions._on_idle,
}
