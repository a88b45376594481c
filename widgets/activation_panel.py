"""The captured activations of a run: one :class:`LayerPlot` per layer call.

:class:`ActivationPanel` keeps a panel per ``(path, call)`` key of
``RunResult.captures``: a key seen for the first time gets a new panel, a key
seen before updates its panel in place, a key gone from the result loses its
panel. Bound-line drags on any panel come out as ``clampDragged`` /
``clampEdited`` with the layer path, for the app to turn into plan edits.
"""

from __future__ import annotations

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtWidgets import QLabel, QScrollArea, QVBoxLayout, QWidget

from hookscope.core import RunResult

from .layer_plot import LayerPlot

Key = tuple[str, int]


class ActivationPanel(QWidget):
    """Scrollable column of :class:`LayerPlot` panels for the latest result."""

    clampDragged = Signal(str, float, float)
    clampEdited = Signal(str, float, float)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("activationPanel")
        self._panels: dict[Key, LayerPlot] = {}
        self._order: list[Key] = []
        self._selected: str | None = None

        self.empty_label = QLabel(
            "No activations yet. Tick the layers you want to see in the module tree "
            "(the Capture column) and run the model.", self)
        self.empty_label.setObjectName("activationEmpty")
        self.empty_label.setWordWrap(True)
        self.empty_label.setAlignment(Qt.AlignmentFlag.AlignCenter)

        self._content = QWidget()
        self._column = QVBoxLayout(self._content)
        self._column.setContentsMargins(4, 4, 4, 4)
        self._column.setSpacing(6)
        self._column.addWidget(self.empty_label)
        self._column.addStretch(1)

        self.scroll = QScrollArea(self)
        self.scroll.setObjectName("activationScroll")
        self.scroll.setWidgetResizable(True)
        self.scroll.setWidget(self._content)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.scroll)
        # Panels updated while scrolled away draw when they come into view.
        self.scroll.verticalScrollBar().valueChanged.connect(self._flush_later)
        self._flush_timer = QTimer(self, singleShot=True, interval=0)
        self._flush_timer.timeout.connect(self.flush_visible)

    # -- public API ------------------------------------------------------------
    def show_result(self, result: RunResult) -> None:
        """Show ``result``'s captures, reusing the panels of keys seen before."""
        clamps = dict(result.plan.clamp) if result.plan is not None else {}
        keys: list[Key] = []
        for path, records in result.captures.items():
            for rec in records:
                key = (path, rec.call)
                keys.append(key)
                panel = self._panels.get(key)
                if panel is None:
                    panel = self._new_panel(path, rec.call)
                panel.update_record(rec, clamps.get(path))
        for key in [k for k in self._panels if k not in set(keys)]:
            panel = self._panels.pop(key)
            self._column.removeWidget(panel)
            panel.hide()
            panel.deleteLater()
        if keys != self._order:
            self._relayout(keys)
            self._flush_later()  # new panels that the layout brings into view
        self.empty_label.setVisible(not self._panels)
        if self._selected is not None:
            self._highlight(self._selected)

    def clear(self) -> None:
        """Remove every panel (e.g. when another model is opened)."""
        for panel in self._panels.values():
            self._column.removeWidget(panel)
            panel.hide()
            panel.deleteLater()
        self._panels.clear()
        self._order = []
        self.empty_label.setVisible(True)

    def panels(self) -> dict[Key, LayerPlot]:
        """The panels by ``(path, call)``, in display order."""
        return {k: self._panels[k] for k in self._order if k in self._panels}

    def select(self, path: str) -> bool:
        """Highlight ``path``'s panels and scroll to the first; ``False`` if it has none."""
        self._selected = path
        first = self._highlight(path)
        if first is None:
            return False
        self.scroll.ensureWidgetVisible(first, 0, 10)
        return True

    def set_clamp_lines(self, path: str, lo: float | None, hi: float | None) -> None:
        """Move ``path``'s bound lines to ``[lo, hi]`` (``None`` for both: no clamp),
        without emitting ``clampDragged``/``clampEdited``."""
        bounds = None if lo is None and hi is None else (
            float("-inf") if lo is None else float(lo), float("inf") if hi is None else float(hi))
        for (p, _call), panel in self._panels.items():
            if p == path:
                panel.set_bounds(bounds)

    def flush_visible(self) -> int:
        """Draw the panels that came into view since their last record; returns how many."""
        return sum(panel.flush() for panel in self._panels.values())

    def resizeEvent(self, event) -> None:  # noqa: N802 - Qt override
        super().resizeEvent(event)
        self._flush_later()

    def showEvent(self, event) -> None:  # noqa: N802 - Qt override
        super().showEvent(event)
        self._flush_later()

    # -- internals -------------------------------------------------------------
    def _flush_later(self, *_args) -> None:
        self._flush_timer.start()

    def _new_panel(self, path: str, call: int) -> LayerPlot:
        panel = LayerPlot(path, call, self._content)
        panel.clampDragged.connect(lambda lo, hi, p=path: self.clampDragged.emit(p, lo, hi))
        panel.clampEdited.connect(lambda lo, hi, p=path: self.clampEdited.emit(p, lo, hi))
        self._panels[(path, call)] = panel
        return panel

    def _relayout(self, keys: list[Key]) -> None:
        """Put the panels in the result's (model) order."""
        for key in self._order:
            if key in self._panels:
                self._column.removeWidget(self._panels[key])
        # Index 0 is the empty-state label; the stretch stays last.
        for i, key in enumerate(keys):
            self._column.insertWidget(1 + i, self._panels[key])
            self._panels[key].show()
        self._order = keys

    def _highlight(self, path: str) -> LayerPlot | None:
        first = None
        for key in self._order:
            panel = self._panels[key]
            on = key[0] == path
            if panel.highlighted != on:
                panel.set_highlighted(on)
            if on and first is None:
                first = panel
        return first
