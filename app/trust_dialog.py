"""The window's question before code named by a file runs: Run once, Always trust, Cancel.

A session file, a recent-files entry and a dropped file are data. When the
model they name runs code (a ``.py`` factory, a module, a pickle), the core
refuses the load with a :class:`~hookscope.core.model.code_trust.CodeTrustError`
naming the file, how many files its import could run and their combined sha256
(:mod:`~hookscope.core.model.code_unit`), before anything is imported. The hash is
computed in the runner's thread, never the window's (a big package takes a second):
the refusal comes back as the session's ``LoadFailed`` carrying the code, and
:class:`TrustGate` takes it from there: code marked "Always trust" at this very hash (the
:class:`~hookscope.core.model.trust_store.TrustStore`) opens at once; anything else
is asked about in :class:`TrustDialog`, which shows what would run. The
question is window-modal but does not block the caller (``open()``, not
``exec()``). It names what asked (``asked_by``: the session file, the recent-files
entry). Cancel leaves the window as it was, with its model, and says in the banner
what was not opened and why (a sticky error: it stays until closed, so that a window
showing exercise 1 after a refused session file on the command line says why).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from PySide6.QtCore import Qt, QTimer
from PySide6.QtWidgets import QDialog, QDialogButtonBox, QLabel, QPushButton, QVBoxLayout, QWidget

from hookscope.core import HookscopeError
from hookscope.core.model import CodeToRun, CodeTrust, CodeTrustError, MODULE, TrustStore
from hookscope.core.base import escape_controls

ONCE, ALWAYS, CANCEL = "once", "always", "cancel"
#: What the window shows after a Cancel, unless the caller says otherwise.
KEPT = "the window keeps the model it had"


def cancelled_message(code: CodeToRun, asked_by: str | None, instead: str) -> str:
    """The banner's line after a Cancel: what was not opened, why, and what is shown."""
    what = asked_by or f"the model in {code.origin}"
    return escape_controls(f"not opened: {what}, because its model runs code ({code.kind} "
                           f"{code.origin}) and you chose Cancel, so none of it ran; {instead}. "
                           "Open it again to be asked again.")


class TrustDialog(QDialog):
    """Shows ``code`` (kind, path or module, sha256); :attr:`answer` is :data:`ONCE`,
    :data:`ALWAYS` or :data:`CANCEL` once it is closed (Escape and the close box cancel)."""

    def __init__(self, code: CodeToRun, parent: QWidget | None = None,
                 asked_by: str | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("trustCodeDialog")
        self.setWindowTitle("Run code from this file?")
        self.setWindowModality(Qt.WindowModality.WindowModal)
        self.answer = CANCEL
        self.code = code
        layout = QVBoxLayout(self)
        e = escape_controls  # each name's control characters shown as text (a path is text)
        shown = (f"{code.kind}: {e(code.target)}\nfile: {e(code.origin)}"
                 if code.kind == MODULE else f"{code.kind}: {e(code.origin)}")
        if code.folder:  # the yes covers every file the import could run, hashed together
            shown += (f"\nwith what it can import from {e(code.folder)}: "
                      f"{code.count} file{'s' if code.count != 1 else ''} in all")
        text = QLabel(  # type: ignore[call-overload]  # stubs omit Qt-property kwargs
            "Opening this model runs the code in these files, with your permissions:\n\n"
            f"{shown}\nsha256 of them all: {code.sha256}\n\n"
            + (f"It is named by {escape_controls(asked_by)}, " if asked_by else
               "It was named by a session file, a recent entry or a dropped file, ")
            + "which anyone can send. Run it only if you trust where the file came from.",
            objectName="trustCodeText")
        text.setTextFormat(Qt.TextFormat.PlainText)  # a path is never markup
        text.setWordWrap(True)
        text.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        layout.addWidget(text)
        buttons = QDialogButtonBox(self)
        self.run_once = QPushButton("Run once", objectName="trustRunOnce")  # type: ignore[call-overload]
        self.always = QPushButton("Always trust these files", objectName="trustAlways")  # type: ignore[call-overload]
        self.cancel = QPushButton("Cancel", objectName="trustCancel")  # type: ignore[call-overload]
        buttons.addButton(self.run_once, QDialogButtonBox.ButtonRole.AcceptRole)
        buttons.addButton(self.always, QDialogButtonBox.ButtonRole.AcceptRole)
        buttons.addButton(self.cancel, QDialogButtonBox.ButtonRole.RejectRole)
        for button in (self.run_once, self.always):
            button.setAutoDefault(False)
        self.cancel.setDefault(True)  # Enter does not run code
        self.cancel.setFocus()
        self.run_once.clicked.connect(lambda: self._close_with(ONCE))
        self.always.clicked.connect(lambda: self._close_with(ALWAYS))
        self.cancel.clicked.connect(self.reject)
        layout.addWidget(buttons)

    def _close_with(self, answer: str) -> None:
        self.answer = answer
        self.accept()


@dataclass(frozen=True)
class _Attempt:
    """A load :meth:`TrustGate.open` made under the file's own trust, whose refusal (a
    :class:`~hookscope.core.session.LoadFailed` carrying the code) is answered by asking."""

    request_id: int
    attempt: Callable[[CodeTrust], Any]
    base: CodeTrust
    asked_by: str | None
    instead: str
    meanwhile: Callable[[], Any] | None


class TrustGate:
    """Opens what a file names, asking first when it runs code (see the module docstring).

    The load checks the code's hash in the runner's thread (a big package takes a second
    to hash: never the window's): :meth:`open` starts it and remembers it by request id;
    when it is refused for want of a yes, the window's load-failed reaction hands the
    refusal to :meth:`refused`, which opens it at once if the code is always trusted at
    this hash, else asks. ``show_error``: the window's banner
    (``show_error(message, sticky=...)``); ``note``: its status line.
    """

    def __init__(self, parent: QWidget, show_error: Callable[..., None],
                 note: Callable[[str], None], store: TrustStore | None = None) -> None:
        self.parent = parent
        self.show_error = show_error
        self.note = note
        self.store = store
        self.dialog: TrustDialog | None = None
        #: the newest load started by :meth:`open` (a newer load replaces an older one,
        #: whose answer never comes)
        self._pending: _Attempt | None = None

    def open(self, attempt: Callable[[CodeTrust], Any], trust_all: bool = False,
             asked_by: str | None = None, instead: str = KEPT,
             meanwhile: Callable[[], Any] | None = None) -> Any:
        """Start ``attempt(trust)`` (a load that checks ``trust`` in the runner's thread
        before anything runs, returning its request id) under the file's own trust;
        returns what it returned, or ``None`` when it failed at once. Should the load be
        refused for want of a yes, :meth:`refused` asks (or opens an always-trusted file).
        ``asked_by``: what named the code ("the session file PATH"), for the question;
        ``instead``: what the window shows after a Cancel; ``meanwhile``: called before
        the question is shown (the command line opens the default demo behind it)."""
        base = CodeTrust.from_data(everything=trust_all)
        request_id = self._attempt(attempt, base)
        if request_id is not None:
            self._pending = _Attempt(request_id, attempt, base, asked_by, instead, meanwhile)
        return request_id

    def refused(self, request_id: int | None, code: CodeToRun | None) -> bool:
        """A load failed (the session's ``LoadFailed``): when it is one :meth:`open` started
        and it was refused for want of a yes to ``code``, go on as :meth:`consider` says
        and return ``True`` (the refusal is not an error to show); else ``False``."""
        pending = self._pending
        if pending is None or code is None or request_id != pending.request_id:
            return False
        self._pending = None
        self.consider(code, pending.attempt, pending.base, pending.asked_by, pending.instead,
                      pending.meanwhile)
        return True

    def consider(self, code: CodeToRun, attempt: Callable[[CodeTrust], Any], base: CodeTrust,
                 asked_by: str | None = None, instead: str = KEPT,
                 meanwhile: Callable[[], Any] | None = None) -> Any:
        """``attempt`` refused to run ``code`` under ``base``: run it at once if the file is
        always trusted at this hash, else call ``meanwhile`` and ask (``None`` while the
        question is open). ``instead``: what the window shows after a Cancel, for the banner."""
        if self._store().trusts(code):
            return self._attempt(attempt, base.granting(code))
        if meanwhile is not None:
            meanwhile()
        self._ask(code, attempt, base, asked_by, instead)
        return None

    @property
    def asking(self) -> bool:
        return self.dialog is not None

    def _store(self) -> TrustStore:
        return self.store or TrustStore()  # read where the environment says, at each use

    def _attempt(self, attempt: Callable[[CodeTrust], Any], trust: CodeTrust) -> Any:
        try:
            return attempt(trust)
        except HookscopeError as exc:  # refused before any request was made: say so
            self.show_error(str(exc))
            return None

    def _ask(self, code: CodeToRun, attempt: Callable[[CodeTrust], Any], base: CodeTrust,
             asked_by: str | None, instead: str) -> None:
        if self.dialog is not None:  # one question at a time: the newest open wins
            self.dialog.reject()
        dlg = TrustDialog(code, self.parent, asked_by)
        self.dialog = dlg

        def answered(_result: int) -> None:
            if self.dialog is dlg:
                self.dialog = None
            dlg.deleteLater()
            if dlg.answer == CANCEL:
                self.show_error(cancelled_message(code, asked_by, instead), sticky=True)
                self.note(f"not opened: {asked_by or code.origin}")
                return
            if dlg.answer == ALWAYS:
                try:
                    self._store().add(code)
                except HookscopeError as exc:  # runs this once all the same
                    self.show_error(f"could not remember the trusted file: {exc}")
            self._attempt(attempt, base.granting(code))

        dlg.finished.connect(answered)
        # shown once the event loop runs: over the window, even one still being built
        QTimer.singleShot(0, dlg, lambda: dlg.open() if self.dialog is dlg else None)
