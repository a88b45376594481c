"""The run bar: device selector, input text, Run button, Live toggle, and the
progress of a long run with its Cancel button.

It holds no model state: the window writes what it says to the session and
sets it back from the session's events.
"""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QStandardItemModel
from PySide6.QtWidgets import (QComboBox, QHBoxLayout, QLabel, QLineEdit, QProgressBar,
                               QPushButton, QToolButton, QWidget)

from hookscope.core.base import DeviceInfo, available_devices

INPUT_TIP = ("What to feed the model, in Hookscope's input syntax:\n"
             "  example              the model's own example input\n"
             "  [[1.0, 2.0, 3.0]]    a literal (a tuple literal gives several inputs)\n"
             "  random:1x3x32x32     random values, optional :seed=N, :dtype=D, :high=N\n"
             "  path/to/file.npy     a NumPy array or a .pt tensor file\n"
             "Press Enter to run.")


class RunBar(QWidget):
    """Device combo (``deviceCombo``), input (``inputEdit``), ``runButton``, ``liveToggle``."""

    runRequested = Signal()
    liveToggled = Signal(bool)
    deviceChanged = Signal(str)
    cancelRequested = Signal()

    #: The widest text the progress bar shows; it is sized for it, so it is never clipped.
    PROGRESS_TEXT = "layer 9999 / 9999 · 999.9 s"

    def __init__(self, devices: list[DeviceInfo] | None = None, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("runBar")
        lay = QHBoxLayout(self)
        lay.setContentsMargins(6, 4, 6, 4)

        self.device_combo = QComboBox(objectName="deviceCombo")  # type: ignore[call-arg]  # stubs omit Qt-property kwargs
        self.device_combo.setToolTip("Where the forward pass runs")
        self._devices = list(devices if devices is not None else available_devices())
        self._fill_devices()
        self.device_combo.currentIndexChanged.connect(
            lambda _i: self.deviceChanged.emit(self.device()))

        self.input_edit = QLineEdit(objectName="inputEdit")  # type: ignore[call-overload]  # stubs omit Qt-property kwargs
        self.input_edit.setText("example")
        self.input_edit.setPlaceholderText("example, [[1.0, 2.0, 3.0]], random:1x3x8x8, file.npy")
        self.input_edit.setToolTip(INPUT_TIP)
        self.input_edit.returnPressed.connect(self.runRequested)

        self.run_button = QPushButton("Run", objectName="runButton")  # type: ignore[call-overload]  # stubs omit Qt-property kwargs
        self.run_button.setToolTip("Run the model without and with the interventions (Ctrl+R, F5)")
        self.run_button.clicked.connect(self.runRequested)

        self.live_toggle = QToolButton(objectName="liveToggle")  # type: ignore[call-arg]  # stubs omit Qt-property kwargs
        self.live_toggle.setText("Live")
        self.live_toggle.setCheckable(True)
        self.live_toggle.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextOnly)
        self.live_toggle.setToolTip("Live: re-run at once on every change of a check box or "
                                    "clamp bound, also while a bound is dragged (Ctrl+L)")
        self.live_toggle.toggled.connect(self.liveToggled)

        self.progress = QProgressBar(objectName="runProgress")  # type: ignore[call-arg]  # stubs omit Qt-property kwargs
        # its place is kept while idle (no jump of the input box), wide enough for its text
        self.progress.setFixedWidth(self.fontMetrics().horizontalAdvance(self.PROGRESS_TEXT) + 40)
        self.progress.setTextVisible(True)
        self.progress.setToolTip("Layers run so far in this run's forward passes")
        self.cancel_button = QToolButton(objectName="runCancel")  # type: ignore[call-arg]  # stubs omit Qt-property kwargs
        self.cancel_button.setText("Cancel")
        self.cancel_button.setToolTip("Stop this run at its next layer (Esc)")
        self.cancel_button.clicked.connect(self.cancelRequested)
        self.hide_progress()

        lay.addWidget(QLabel("Device"))
        lay.addWidget(self.device_combo)
        lay.addSpacing(8)
        lay.addWidget(QLabel("Input"))
        lay.addWidget(self.input_edit, 1)
        lay.addWidget(self.run_button)
        lay.addWidget(self.live_toggle)
        lay.addWidget(self.progress)
        lay.addWidget(self.cancel_button)

    def _fill_devices(self) -> None:
        combo = self.device_combo
        model = combo.model()
        for info in self._devices:
            combo.addItem(info.label, info.name)
            i = combo.count() - 1
            if not info.available:
                # Disabled through the item model's flags: shown, not selectable.
                if isinstance(model, QStandardItemModel):
                    item = model.item(i)
                    item.setFlags(item.flags() & ~Qt.ItemFlag.ItemIsEnabled)
                combo.setItemData(i, f"{info.label} is not available: {info.reason}",
                                  Qt.ItemDataRole.ToolTipRole)
            else:
                combo.setItemData(i, info.name, Qt.ItemDataRole.ToolTipRole)

    # -- state -----------------------------------------------------------------
    @property
    def devices(self) -> list[DeviceInfo]:
        return list(self._devices)

    def device(self) -> str:
        return str(self.device_combo.currentData() or "cpu")

    def set_device(self, name: str) -> bool:
        """Select ``name`` if it is listed and enabled; False otherwise (selection unchanged)."""
        for i, info in enumerate(self._devices):
            if info.name == name or (name == "cuda" and info.name == "cuda:0"):
                if not info.available:
                    return False
                self.device_combo.setCurrentIndex(i)
                return True
        return False

    def input_text(self) -> str:
        text = self.input_edit.text()
        if text.lstrip().startswith("text:"):  # a prompt's trailing spaces are tokens
            return text.lstrip()
        return text.strip() or "example"

    def set_input_text(self, text: str) -> None:
        self.input_edit.setText(text)

    def set_no_example_hint(self, on: bool) -> None:
        """Say in the empty input box that the model brought no example input."""
        self.input_edit.setPlaceholderText(
            "this model has no example input: type one, e.g. random:1x3x32x32 or [[1.0, 2.0]]"
            if on else "example, [[1.0, 2.0, 3.0]], random:1x3x8x8, file.npy")

    def is_live(self) -> bool:
        return self.live_toggle.isChecked()

    def set_live(self, on: bool) -> None:
        self.live_toggle.setChecked(on)

    # -- progress of a run ------------------------------------------------------------
    def start_progress(self) -> None:
        """A run started: the bar says so at once (busy until the first layer reports)."""
        self.progress.setRange(0, 0)
        self.progress.setFormat("running…")
        self.progress.setEnabled(True)
        self.cancel_button.setEnabled(True)

    def show_progress(self, done: int, total: int, elapsed_s: float) -> None:
        """``done`` of ``total`` layer calls after ``elapsed_s``."""
        self.progress.setRange(0, max(total, 1))
        self.progress.setValue(min(done, max(total, 1)))
        self.progress.setFormat(f"layer %v / %m · {elapsed_s:.1f} s")
        self.progress.setEnabled(True)
        self.cancel_button.setEnabled(True)

    def hide_progress(self, word: str = "") -> None:
        """No run: the bar empty (or saying ``word``, e.g. "cancelled"), Cancel disabled."""
        self.progress.setRange(0, 1)
        self.progress.setValue(0)
        self.progress.setFormat(word)
        self.progress.setEnabled(bool(word))
        self.cancel_button.setEnabled(False)

    def progress_text(self) -> str:
        return self.progress.text() if self.progress.maximum() else self.progress.format()
