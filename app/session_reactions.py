"""How the main window follows its session: one handler per session event.

:class:`SessionReactions` is the window's part that answers its session: the
window (:class:`~hookscope.app.main_window.MainWindow`) builds the parts and
hands them, with the few window calls the handlers make, to this object, which
keeps its own state (was the last run cancelled). Every session event reaches
:meth:`SessionReactions._on_event` on the GUI thread, the one place answers
arrive, which hands it to the handler of its type (:data:`REACTIONS`); that
handler redraws the parts that show it: no widget keeps its own copy of a
bound, the device, Live or statistics-only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

from hookscope.core import Intervention, Plan, RunResult, SessionEvent
from hookscope.core.analyses import LayerPairRequest, LayerPairs
from hookscope.core.session import (DeviceChanged, Idle, InputChanged, LoadFailed, LoadWarning,
                                    ModelChanged, OptionsChanged, PlanChanged, ResultArrived,
                                    RunCancelled, RunFailed, RunProgress, RunStarted)
from hookscope.core.views import input_token_strings
from hookscope.core.model import is_live

from .demo_setup import note_for

if TYPE_CHECKING:
    from .main_window import MainWindow


def shown_input(result: RunResult, meaning: Any) -> tuple[Any, list[str] | None]:
    """The input a result ran on and its token strings, as the runner's thread made them
    ready (``result.display``): the GUI thread never parses an input (or decodes an image)."""
    d = result.display
    if d is not None:
        return d.inputs, d.tokens
    return result.inputs, input_token_strings(result.inputs, meaning)


class SessionReactions:
    """Session event handlers (``_on_<kind>``), drawing on the parts of window ``win``."""

    def __init__(self, win: "MainWindow") -> None:
        # What the handlers draw on: the window's parts, built by main_window.py.
        self.session, self.worker, self.recent = win.session, win.worker, win.recent
        self.run_bar, self.tree, self.outputs, self.panel = win.run_bar, win.tree, win.outputs, win.panel
        self.banner, self.note, self.status, self.actions_ = win.banner, win.note, win.status, win.actions_
        # ... and what they ask of the window itself.
        self.modelLoaded, self.resultShown, self.idle = win.modelLoaded, win.resultShown, win.idle
        self.setWindowTitle, self.statusBar = win.setWindowTitle, win.statusBar
        self.show_error, self.is_live, self.is_idle = win.show_error, win.is_live, win.is_idle
        self.show_alarm = win.banner.show_alarm
        self.trust_gate = win.trust_gate   # a load refused for want of a yes is asked about
        self._clear_transient_error = win.banner.clear_transient
        self._win = win
        self._cancelled = False   # the last run was cancelled: the progress bar says so
        self._plan_before = self.session.plan
        self._replaced: tuple[str, Intervention, Intervention] | None = None

    @property
    def last_result(self) -> RunResult | None:
        return self._win.last_result

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
        if self.trust_gate.refused(ev.request_id, ev.code):
            return  # a file's code waits for the person's yes: asked about, not an error
        self.show_error(f"could not open the model: {ev.message}")

    def _on_plan(self, ev: PlanChanged) -> None:
        self._show_undo()
        before, self._plan_before = self._plan_before, ev.plan
        self._replaced = replacement(before, ev.plan, self._replaced)
        message = ""
        if not self.is_live() and self.last_result is not None:
            message = ("settings changed: the plots show the last run; "
                       "press Run (Ctrl+R) or turn on Live (Ctrl+L)")
        if self._replaced is not None:
            # A layer holds one intervention: a bound dragged on a layer with another
            # kind (a scale, a patch) replaced it. Said, not silent; undo brings it back.
            path, old, new = self._replaced
            message = (f"{path}: the {new.name} replaced {old.describe()} (a layer holds one "
                       "intervention; Edit → Undo brings it back)"
                       + ("; press Run (Ctrl+R)" if message else ""))
        if message:
            self.statusBar().showMessage(message)

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
        lm = self.session.model  # the output by meaning, with the input's tokens
        shown, tokens = shown_input(result, lm.meaning if lm else None)
        self.panel.set_token_labels(tokens)
        self.panel.show_result(result, self._pairs(result))
        self.outputs.show_result(result, lm.meaning if lm else None, shown)
        self.status.show_result(result)
        self._clear_transient_error()
        if result.alarms:  # an intervention that may have done nothing must not pass unseen
            self.show_alarm("intervention alarm: " + "; ".join(result.alarms))
        self.resultShown.emit(result)

    def _pairs(self, result: RunResult) -> LayerPairs | None:
        """Model A against model B at the selected layer, while a comparison asks for it
        (File → Compare with…): those panels show A and B instead of without and with."""
        pairs = result.extras.get(LayerPairRequest.name)
        wanted = LayerPairRequest.name in self.session.derived
        return pairs if wanted and isinstance(pairs, LayerPairs) else None

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
        self.settle()

    def settle(self) -> None:
        """Once nothing is left to do (no run, no picture being made in the view worker),
        "running…" leaves the status bar and ``idle`` is emitted; called when the session
        goes idle and when the view worker has answered its last job."""
        if self.is_idle():
            self.status.show_busy(False)
            self.idle.emit()

    # -- reactions ---------------------------------------------------------------
    def _show_options(self) -> None:
        o, a = self.session.options, self.actions_
        for widget, on in ((a.live, o.live), (a.stats_only, o.stats_only)):
            if widget.isChecked() != on:
                widget.setChecked(on)
        self.run_bar.set_live(o.live)

    def _show_undo(self) -> None:
        assert self.actions_.undo is not None and self.actions_.redo is not None  # build_menus sets both
        self.actions_.undo.setEnabled(self.session.history.can_undo)
        self.actions_.redo.setEnabled(self.session.history.can_redo)

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


def replacement(before: Plan, after: Plan, last: tuple[str, Intervention, Intervention] | None
                ) -> tuple[str, Intervention, Intervention] | None:
    """``(path, old, new)`` when the edit from ``before`` to ``after`` gave one layer an
    intervention of another kind in place of the one it had; ``last`` while the edits only
    go on changing that new one (the steps of the drag that replaced it); else ``None``."""
    old_ivs, new_ivs = before.all_interventions(), after.all_interventions()
    changed = {p for p in set(old_ivs) | set(new_ivs) if old_ivs.get(p) != new_ivs.get(p)}
    if before.capture != after.capture or len(changed) > 1:
        return None
    if len(changed) == 1:
        path = next(iter(changed))
        old, new = old_ivs.get(path), new_ivs.get(path)
        if old is not None and new is not None and type(old) is not type(new):
            return path, old, new
    if last is not None and changed <= {last[0]} and type(new_ivs.get(last[0])) is type(last[2]):
        return last
    return None
