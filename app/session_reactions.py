"""How the main window follows its session: one handler per session event.

:class:`SessionReactions` is the window's part that answers its session: the
window (:class:`~hookscope.app.main_window.MainWindow`) builds the parts and
hands them over; every session event reaches :meth:`SessionReactions._on_event`
on the GUI thread, the one place answers arrive, and redraws the parts that
show it: no widget keeps its own copy of a bound, the device, Live or
statistics-only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hookscope.core import SessionEvent
from hookscope.core.views import input_token_strings, inputs_for_display
from hookscope.core.model import is_live

from .demo_setup import note_for

if TYPE_CHECKING:
    from .main_window import MainWindow


class SessionReactions:
    """Session event handlers (``_on_<kind>``), drawing on the parts of window ``win``."""

    def __init__(self, win: "MainWindow") -> None:
        self.win = win
        self.cancelled = False   # the last run was cancelled: the progress bar says so

    # -- the one place session events arrive (GUI thread) -------------------------
    def _on_event(self, ev: SessionEvent) -> None:
        handler = getattr(self, f"_on_{ev.kind}", None)
        if handler is not None:
            handler(ev)

    def _on_model(self, ev: SessionEvent) -> None:
        w = self.win
        lm, s = ev.value, w.session
        w.run_bar.set_input_text(s.input_text)
        w.run_bar.set_no_example_hint(lm.example_input is None)
        w.status.reset(w.worker.runs_done, w.worker.runs_dropped, w.worker.runs_failed)
        w.panel.clear()      # the old model's panels mean nothing for the new one
        w.panel.view_choices = s.view.setdefault("layer_views", {})   # kept in session files
        w.outputs.clear()
        note = note_for(lm.spec, lm.description)
        w.note.setText(note)
        w.note.setVisible(bool(note))
        w.setWindowTitle(f"Hookscope — {lm.spec}")
        if not is_live(lm):  # a model of a Python session cannot be reopened from the menu
            w.recent.add(lm.spec, lm.weights)
        w.clear_transient_error()
        w.modelLoaded.emit(lm.spec)
        if s.view.get("selected"):
            w.tree.select_path(s.view["selected"])

    def _on_load_warning(self, ev: SessionEvent) -> None:
        w = self.win
        # What the load left out (a layer the model lacks, a device it cannot use)
        # stays until closed: the first run's success must not hide it.
        w.show_error(str(ev.value), sticky=True)

    def _on_load_failed(self, ev: SessionEvent) -> None:
        w = self.win
        w.show_error(f"could not open the model: {ev.value}")

    def _on_plan(self, ev: SessionEvent) -> None:
        w = self.win
        self.show_undo()
        if not w.is_live() and w.last_result is not None:
            w.statusBar().showMessage("settings changed: the plots show the last run; "
                                      "press Run (Ctrl+R) or turn on Live (Ctrl+L)")

    def _on_input(self, ev: SessionEvent) -> None:
        w = self.win
        if w.run_bar.input_text() != ev.value:
            w.run_bar.set_input_text(ev.value)

    def _on_device(self, ev: SessionEvent) -> None:
        w = self.win
        w.run_bar.set_device(ev.value)
        act = w.actions_.device_actions.get(ev.value)
        if act is not None and not act.isChecked():
            act.setChecked(True)

    def _on_options(self, ev: SessionEvent) -> None:
        self.show_options()

    def _on_started(self, ev: SessionEvent) -> None:
        w = self.win
        self.cancelled = False
        w.status.show_busy(True)
        w.run_bar.start_progress()

    def _on_progress(self, ev: SessionEvent) -> None:
        w = self.win
        p = ev.value
        w.run_bar.show_progress(p.done, p.total, p.elapsed_s)

    def _on_result(self, ev: SessionEvent) -> None:
        w = self.win
        result = ev.value
        lm = w.session.model  # the output by meaning, with the input's tokens where cheap to know
        shown = (inputs_for_display(w.session.input_text, lm.example_input, lm.meaning.codec)
                 if lm is not None and result.inputs is None else result.inputs)  # Ray: the tokens
        w.panel.set_token_labels(input_token_strings(shown, lm.meaning if lm else None))
        w.panel.show_result(result)
        w.outputs.show_result(result, lm.meaning if lm else None, shown)
        w.status.show_result(result)
        w.clear_transient_error()
        if result.alarms:  # an intervention that may have done nothing must not pass unseen
            w.show_error("intervention alarm: " + "; ".join(result.alarms))
        w.resultShown.emit(result)

    def _on_error(self, ev: SessionEvent) -> None:
        w = self.win
        extra = "\n(The plots still show the last successful run.)" if w.last_result else ""
        w.show_error(f"{ev.value}{extra}")

    def _on_cancelled(self, ev: SessionEvent) -> None:
        w = self.win
        self.cancelled = True
        w.run_bar.hide_progress("cancelled")
        w.status.show_cancelled()

    def _on_idle(self, ev: SessionEvent) -> None:
        w = self.win
        w.run_bar.hide_progress("cancelled" if self.cancelled else "")
        runs = w.worker
        w.status.show_counts(runs.runs_done, runs.runs_dropped, runs.runs_failed)
        if w.is_idle():
            w.status.show_busy(False)
            w.idle.emit()

    # -- reactions ---------------------------------------------------------------
    def show_options(self) -> None:
        w = self.win
        o, a = w.session.options, w.actions_
        for widget, on in ((a.live, o.live), (a.stats_only, o.stats_only)):
            if widget.isChecked() != on:
                widget.setChecked(on)
        w.run_bar.set_live(o.live)

    def show_undo(self) -> None:
        w = self.win
        assert w.actions_.undo is not None and w.actions_.redo is not None  # build_menus sets both
        w.actions_.undo.setEnabled(w.session.can_undo)
        w.actions_.redo.setEnabled(w.session.can_redo)

