"""File menu actions that touch files: export captures, export a script, save/open a session.

They take data, not the window: the :class:`~hookscope.core.Session` and an
:class:`ActionUi` (where dialogs open, how an error or a note is shown). Each
takes an optional path that skips the file dialog (tests and scripts). Every
mistake (nothing captured yet, statistics-only mode, a bad file name, an
unwritable folder, a damaged session file) goes to ``ui.error``: in the window,
the error banner.
"""

from __future__ import annotations

import threading
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from PySide6.QtWidgets import QWidget

from hookscope.core import HookscopeError, Session, saes_of
from hookscope.core.base import ReadFiles, files_read, refuse_overwrite, write_text
from hookscope.core.export import (sae_weights_file, save_captures, standalone_script,
                                   write_sae_weights)
from hookscope.core.session import LiveModelNotSaved, SUFFIX, SessionSetup, read_session_file
from hookscope.core.analyses import with_built_vectors
from hookscope.widgets.gui_relay import Gate, keep
from hookscope.widgets.last_folder import pick_file

SESSION_FILTER = f"Hookscope session (*{SUFFIX})"


@dataclass
class ActionUi:
    """Where the actions' dialogs open and where their words go."""

    parent: QWidget
    error: Callable[[str], None]
    note: Callable[[str], None]

    def guarded(self, fn: Callable[..., object]) -> Callable[..., object]:
        """``fn`` with a person's mistakes (a HookscopeError) shown as an error instead of
        raised."""
        def call(*args: object) -> object:
            try:
                return fn(*args)
            except HookscopeError as exc:
                self.error(str(exc))
                return None
        return call


def files_the_session_reads(session: Session) -> ReadFiles:
    """Every file the open session has read (its registry: model, weights, inputs, vectors,
    SAE folders, ...) and the model file, weights, input, labels and source inputs it will
    read: no export may replace them (the session file itself may be saved over: that is
    Save)."""
    m = session.model
    reads = ReadFiles("the open model")
    reads.update(session.read_files)
    return files_read(m.spec if m else None, m.weights if m else None, [session.input_text],
                      session.labels, plan=session.plan, into=reads)


def _refuse_inputs(session: Session, what: str, path: str) -> None:
    refuse_overwrite([(what, path)], files_the_session_reads(session), "the open model")


def _ask_save(ui: ActionUi, title: str, default: str, filters: str) -> str | None:
    # the dialog starts in the folder last used for an export, and remembers this one
    return pick_file(ui.parent, "export", title, filters, save=True, file_name=default) or None


def export_captures(session: Session, ui: ActionUi, path: str | None = None) -> Path | None:
    """Save the last result's kept captures to .npz or .safetensors."""
    if session.last_result is None:
        ui.error("nothing to export yet: run the model first (Ctrl+R)")
        return None
    path = path or _ask_save(ui, "Export captures", "captures.npz",
                             "NumPy (*.npz);;safetensors (*.safetensors)")
    if not path:
        return None
    try:
        _refuse_inputs(session, "the captures file", path)
        written = save_captures(session.last_result.captures, path)
    except HookscopeError as exc:
        ui.error(str(exc))
        return None
    ui.note(f"captures saved to {written}")
    return written


def export_script(session: Session, ui: ActionUi, path: str | None = None,
                  gate: Gate | None = None) -> Path | None:
    """Write the current model, input and plan as a plain-PyTorch hook script.

    Making the script loads the model again from its spec and runs it once (the input's
    shape): with ``gate`` (the window's way onto the GUI thread) that and the writing run in
    a thread of their own, this returns ``None`` at once, and the outcome (the note, or the
    error) is shown on the GUI thread while the gate is open; the thread holds no Qt object.
    Without it all of it runs here and the written path is returned (scripts, tests).
    """
    if session.model is None:
        ui.error("no model is open: use File → Open model…")
        return None
    try:
        last = session.last_result
        # diff: vectors are computed where the model runs: the last run's values go in the script
        plan = with_built_vectors(session.current_plan(), last.plan if last is not None else None)
        saes = saes_of(session.model.module, session.saes)
    except HookscopeError as exc:
        ui.error(str(exc))
        return None
    m = session.model
    spec, weights, input_text, device, trust = (m.spec, m.weights, session.input_text,
                                                session.device, session.code_trust)

    def script(to: str) -> str:  # sae-* edits name the SAE weights file beside it
        return standalone_script(spec, plan, input_text, weights, device, trust=trust,
                                 saes=saes, script_path=to)

    if gate is None:
        try:  # what cannot be written is said before the file dialog
            script(path or "hookscope_repro.py")
        except HookscopeError as exc:
            ui.error(str(exc))
            return None
    path = path or _ask_save(ui, "Export as PyTorch script", "hookscope_repro.py", "Python (*.py)")
    if not path:
        return None
    try:
        _refuse_inputs(session, "the script", path)
        _refuse_inputs(session, "the script's SAE weights", str(sae_weights_file(path)))
    except HookscopeError as exc:
        ui.error(str(exc))
        return None
    to = path

    def write() -> Path:
        text = script(to)
        write_sae_weights(to, plan, saes)
        write_text(to, text)  # whole or not at all
        return Path(to)

    if gate is None:
        try:
            written = write()
        except HookscopeError as exc:
            ui.error(str(exc))
            return None
        ui.note(f"script written to {written}")
        return written

    window_gate = gate   # (narrowed: not None here)

    def show(outcome: Path | str) -> None:   # the GUI thread: a path written, or an error
        if not window_gate.open:
            return
        if isinstance(outcome, Path):
            ui.note(f"script written to {outcome}")
        else:
            ui.error(outcome)

    report = keep(show)   # the thread holds its number, not the window

    def in_thread() -> None:
        outcome: Path | str
        try:
            outcome = write()
        except HookscopeError as exc:
            outcome = str(exc)
        except Exception as exc:  # the model's own code failed while being loaded or run
            outcome = f"the script was not written: {type(exc).__name__}: {exc}"
        report(outcome)

    threading.Thread(target=in_thread, name="hookscope-export-script", daemon=True).start()
    return None


def save_session(session: Session, ui: ActionUi, path: str | None = None) -> Path | None:
    """File → Save session: the model, input, device, plan, options and view to a file."""
    if session.model is None:
        ui.error("nothing to save: no model is open (File → Open model…)")
        return None
    path = path or _ask_save(ui, "Save session", f"session{SUFFIX}", SESSION_FILTER)
    if not path:
        return None
    if not path.endswith(".json"):
        path += SUFFIX
    session.save_note = None
    try:
        _refuse_inputs(session, "the session file", path)
        with warnings.catch_warnings():  # a live model's note is shown below instead
            warnings.simplefilter("ignore", LiveModelNotSaved)
            written = session.save(path)
    except HookscopeError as exc:
        ui.error(str(exc))
        return None
    if session.save_note:  # a model of a notebook: say what the file does not hold, and stay
        ui.error(f"session saved to {written}, but {session.save_note}")
    else:
        ui.note(f"session saved to {written}")
    return written


def pick_session(ui: ActionUi) -> str | None:
    """File → Open session's file dialog: the path picked, or ``None``."""
    return pick_file(ui.parent, "session", "Open session", SESSION_FILTER) or None


def read_session(ui: ActionUi, path: str | None = None) -> SessionSetup | None:
    """File → Open session: a checked setup to open, or ``None`` (the error is shown,
    nothing changed)."""
    if path is None:
        path = pick_session(ui)
        if not path:
            return None
    try:
        return read_session_file(path)
    except HookscopeError as exc:
        ui.error(f"could not open the session: {exc}")
        return None
