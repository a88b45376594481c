"""The small bar above a layer panel's plots that picks how a wide activation
is seen (map, per-token norm, per-unit norm, top-k units) and whether its
values are drawn on a log scale.

:class:`ViewChooser` holds no state beyond what the person chose: ``view``
(``None`` until they pick one: the panel's default) and ``log`` (``None``:
automatic, on when the values span more than a few decades). It says why the
log scale is on ("log scale: values span 9 decades") in its note, and emits
``changed`` when the person picks, never when the panel sets it.
"""

from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QCheckBox, QComboBox, QHBoxLayout, QLabel, QWidget

from hookscope.core.views import view_names, wants_log


class ViewChooser(QWidget):
    """View combo box (``viewChooser``), log check box (``logScale``), note (``logNote``)."""

    changed = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.view: str | None = None      # chosen by the person (None: the default view)
        self.log: bool | None = None      # chosen by the person (None: automatic)
        self.decades = 0.0                # how many decades the values span
        self._quiet = False
        self.combo = QComboBox(self)
        self.combo.setObjectName("viewChooser")
        self.combo.setToolTip("How to see a wide activation: the whole map, one norm per "
                              "token/row, one per unit/channel, or the k largest units")
        self.combo.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToContents)
        self.log_box = QCheckBox("log", self)
        self.log_box.setObjectName("logScale")
        self.log_box.setToolTip("Signed log scale (sign(x)·log10(1+|x|/s)) for the histogram's "
                                "values and counts and for the map's colours; hover readouts "
                                "still show the real values")
        self.note = QLabel(self)
        self.note.setObjectName("logNote")
        self.note.setStyleSheet("color: #6a4a00;")
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(6)
        layout.addWidget(self.note)
        layout.addWidget(self.combo)
        layout.addWidget(self.log_box)
        self.combo.hide()
        self.combo.activated.connect(self._picked_view)
        self.log_box.clicked.connect(self._picked_log)

    # -- what the panel asks -------------------------------------------------------
    def log_on(self) -> bool:
        """The log scale in effect: the person's choice, else the automatic one."""
        return self.log if self.log is not None else wants_log(self.decades)

    def effective_view(self) -> str:
        """The view drawn: the chosen one if offered, else ``map``."""
        views = self.offered()
        return self.view if self.view in views else "map"

    def offered(self) -> list[str]:
        return [str(self.combo.itemData(i)) for i in range(self.combo.count())]

    # -- what the panel tells it ------------------------------------------------------
    def set_offer(self, views: tuple[str, ...], kind: str) -> None:
        """The views a panel of ``kind`` offers (none: the combo box hides)."""
        names = view_names(kind)
        wanted = [(v, names[v]) for v in views]
        have = [(str(self.combo.itemData(i)), self.combo.itemText(i)) for i in range(self.combo.count())]
        if wanted != have:
            self.combo.blockSignals(True)
            self.combo.clear()
            for v, text in wanted:
                self.combo.addItem(text, v)
            self.combo.blockSignals(False)
        self.combo.setVisible(bool(views))
        self._show()

    def set_decades(self, decades: float) -> None:
        self.decades = decades
        self._show()

    def set_choice(self, view: str | None, log: bool | None) -> None:
        """Restore a stored choice (no ``changed``)."""
        self.view, self.log = view, log
        self._show()

    def choice(self) -> dict:
        """The person's choice as plain data (kept in the session's view state)."""
        return {"view": self.view, "log": self.log}

    # -- internals ----------------------------------------------------------------
    def _show(self) -> None:
        i = self.combo.findData(self.effective_view())
        if i >= 0 and i != self.combo.currentIndex():
            self.combo.setCurrentIndex(i)
        on = self.log_on()
        if self.log_box.isChecked() != on:
            self.log_box.setChecked(on)
        spread = f"values span {self.decades:.0f} decades" if self.decades >= 1.5 else ""
        text = (f"log scale: {spread}" if spread else "log scale") if on else ""
        self.note.setText(text)
        self.note.setVisible(bool(text))

    def _picked_view(self, index: int) -> None:
        self.view = str(self.combo.itemData(index))
        self._show()
        self.changed.emit()

    def _picked_log(self, checked: bool) -> None:
        # Back to automatic when the pick equals what automatic would do: a later,
        # wider or narrower run then gets its own default again.
        self.log = None if checked == wants_log(self.decades) else checked
        self._show()
        self.changed.emit()
