"""The in-window error banner: the core's message, and a button to close it.

Errors never take the window down or throw away the user's setup; they show
here until closed or until the next run succeeds. An *alarm* (an intervention
that may have done nothing) is news about the plan, not a failure: it shows in
the same place, amber instead of red, and :meth:`ErrorBanner.kind` tells which.
A *sticky* error (a command-line mistake) stays until closed: a later message is
added under it instead of replacing it.
"""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QToolButton, QWidget


ERROR, ALARM = "error", "alarm"
_STYLES = {
    ERROR: ("#errorBanner { background: #fdecea; border: 1px solid #e0a3a0; "
            "border-radius: 3px; } #errorBanner QLabel { color: #611a15; }"),
    ALARM: ("#errorBanner { background: #fff4d6; border: 1px solid #e0c060; "
            "border-radius: 3px; } #errorBanner QLabel { color: #5c4400; }"),
}


class ErrorBanner(QFrame):
    """A red strip (``errorBanner``) holding one message (``errorText``)."""

    closed = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("errorBanner")
        self.setFrameShape(QFrame.Shape.StyledPanel)
        self._kind = ERROR
        self._sticky = False
        self._style(ERROR)
        lay = QHBoxLayout(self)
        lay.setContentsMargins(8, 4, 4, 4)
        self.label = QLabel(objectName="errorText")  # type: ignore[call-overload]  # stubs omit Qt-property kwargs
        self.label.setWordWrap(True)
        self.label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.close_button = QToolButton(objectName="errorClose")  # type: ignore[call-arg]  # stubs omit Qt-property kwargs
        self.close_button.setText("✕")
        self.close_button.setToolTip("Dismiss")
        self.close_button.setAutoRaise(True)
        self.close_button.clicked.connect(self.dismiss)
        self.closed.connect(lambda: setattr(self, "_sticky", False))
        lay.addWidget(self.label, 1)
        lay.addWidget(self.close_button, 0, Qt.AlignmentFlag.AlignTop)
        self.hide()

    def show_error(self, message: str, sticky: bool = False) -> str:
        """Show ``message`` (red); returns the text shown. A non-sticky one goes at the next
        good result (:meth:`clear_transient`); a sticky one stays until closed, and a
        message shown while it does is added under it, sticky too."""
        if self._sticky and not self.isHidden():
            message, sticky = f"{self.text()}\n{message}", True
        self._sticky = sticky
        self._style(ERROR)
        self.label.setText(message)
        self.show()
        return message

    def show_alarm(self, message: str) -> None:
        """Show news about the plan (amber): the run worked, but may not have done what
        was meant. It goes at the next result; a sticky error stays, the alarm under it."""
        if self._sticky and not self.isHidden():
            self.label.setText(f"{self.text()}\n{message}")
            return
        self._style(ALARM)
        self.label.setText(message)
        self.show()

    def clear_transient(self) -> None:
        """Dismiss what is shown unless it is a sticky error."""
        if not self._sticky:
            self.dismiss()

    def error_text(self) -> str:
        """The error shown ("" when none, or an alarm)."""
        return self.text() if self._kind == ERROR else ""

    def alarm_text(self) -> str:
        """The alarm shown ("" when none, or an error)."""
        return self.text() if self._kind == ALARM else ""

    def kind(self) -> str:
        """``"error"`` or ``"alarm"``: what the banner shows (when shown)."""
        return self._kind

    def _style(self, kind: str) -> None:
        self._kind = kind
        self.setStyleSheet(_STYLES[kind])

    def dismiss(self) -> None:
        self.label.clear()
        self.hide()
        self.closed.emit()

    def text(self) -> str:
        return "" if self.isHidden() else self.label.text()
