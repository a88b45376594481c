"""The in-window error banner: the core's message, and a button to close it.

Errors never take the window down or throw away the user's setup; they show
here until closed or until the next run succeeds.
"""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QToolButton, QWidget


class ErrorBanner(QFrame):
    """A red strip (``errorBanner``) holding one message (``errorText``)."""

    closed = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("errorBanner")
        self.setFrameShape(QFrame.Shape.StyledPanel)
        self.setStyleSheet("#errorBanner { background: #fdecea; border: 1px solid #e0a3a0; "
                           "border-radius: 3px; } #errorBanner QLabel { color: #611a15; }")
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
        lay.addWidget(self.label, 1)
        lay.addWidget(self.close_button, 0, Qt.AlignmentFlag.AlignTop)
        self.hide()

    def show_error(self, message: str, context: str = "") -> None:
        text = f"{context}: {message}" if context else message
        self.label.setText(text)
        self.show()

    def dismiss(self) -> None:
        self.label.clear()
        self.hide()
        self.closed.emit()

    def text(self) -> str:
        return "" if self.isHidden() else self.label.text()
