"""The captured activations of a run: one :class:`LayerPlot` per layer call.

:class:`ActivationPanel` keeps a panel per ``(path, call)`` key of
``RunResult.captures``: a key seen for the first time gets a new panel, a key
seen before updates its panel in place, a key gone from the result loses its
panel. A captured layer that did not run (no record) gets a one-line note
instead, so a ticked layer never just goes missing. Every panel's bound lines
show and edit the session's plan themselves (:mod:`.bound_lines`). Layers given as
model A against model B (a comparison's ``LayerPairs``) show those records instead.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtWidgets import QFrame, QLabel, QLayout, QScrollArea, QVBoxLayout, QWidget

from hookscope.core import CaptureRecord, HookscopeError, RunResult, Session
from hookscope.core.analyses import LayerPairs
from hookscope.core.views import ResultDisplay, ShapeViews, ShapeWanted

from .histogram_view import PLOT_HEIGHT
from .layer_plot import LayerPlot
from .leaf_chooser import show_leaves
from .figure_export import FIGURE_SUFFIXES, write_figure
from .view_worker import ViewWorker

Key = tuple[str, int]

#: A plot may be this many times taller than wide (one histogram in a tall window),
#: no more: beyond that a panel would be a thin column.
MAX_ASPECT = 2.0
_SLACK = 4   # px kept free below the panels, so rounding never brings a scroll bar


def _chrome_height(panel: LayerPlot) -> int:
    """``panel``'s height beyond its plots (title, statistics, margins), from its
    layout as it stands now (the statistics wrap to the panel's width), so a fit
    right after a plot height or a text changed needs no second pass."""
    layout = panel.layout()
    assert layout is not None  # LayerPlot builds its layout in __init__
    _invalidate(layout)   # a plot's new height reaches the cached sizes only at the next layout pass
    if panel.width() > 0 and panel.hasHeightForWidth():
        total = panel.heightForWidth(panel.width())
    else:
        total = panel.sizeHint().height()
    # Stacked, the spacing between the histogram and the view counts as chrome:
    # what is left is shared as rows x the plot height.
    return total - (2 if panel.is_stacked() else 1) * panel.hist_widget.minimumHeight()


def _invalidate(layout: QLayout) -> None:
    """Drop ``layout``'s cached sizes and those of the layouts inside it (Qt
    invalidates only the top one when a child's size limits change)."""
    for i in range(layout.count()):
        item = layout.itemAt(i)
        inner = item.layout() if item is not None else None
        if inner is not None:
            _invalidate(inner)
    layout.invalidate()


def _sources(captures: dict[str, list[CaptureRecord]], display: ResultDisplay | None,
             pairs: LayerPairs | None
             ) -> list[tuple[str, list[CaptureRecord], ResultDisplay | None]]:
    """Each layer shown, its records and their display-ready numbers: the run's, with the
    layers ``pairs`` holds showing model A against model B instead (those the run did
    not capture first)."""
    if pairs is None:
        return [(path, records, display) for path, records in captures.items()]
    paired = pairs.captures
    return ([(path, recs, pairs.display) for path, recs in paired.items() if path not in captures]
            + [(path, paired[path], pairs.display) if path in paired else (path, records, display)
               for path, records in captures.items()])


def _str_or_none(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _bool_or_none(value: object) -> bool | None:
    return value if isinstance(value, bool) else None


def _set_plot_height(panel: LayerPlot, height: float) -> None:
    """Both plots exactly ``height`` tall (at least :data:`PLOT_HEIGHT`): the least
    *and* the most, because a pyqtgraph view's size hint is its last size, which
    would keep a panel as tall as it ever was once the window shrinks."""
    panel.set_plot_height(height)
    target = max(PLOT_HEIGHT, int(height))
    for w in (panel.hist_widget, panel.view_widget, panel.none_label):
        if w.maximumHeight() != target:
            w.setMaximumHeight(target)


class ActivationPanel(QWidget):
    """Scrollable column of :class:`LayerPlot` panels for the latest result.

    The panels' bound lines follow and edit ``session``'s plan (without one, a
    session of its own that only holds edits)."""

    readout = Signal(str)   # the value under the cursor on any panel ("" when none)
    viewChosen = Signal(str, object)   # a panel's view picked: (layer path, {"view", "log"})
    # The public name (tests, scripts) shadows QWidget.scroll(dx, dy), which nothing here calls.
    scroll: QScrollArea  # type: ignore[assignment]

    def __init__(self, parent: QWidget | None = None, session: Session | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("activationPanel")
        self.session = session if session is not None else Session(runner_factory=None)
        self._panels: dict[Key, LayerPlot] = {}
        self._token_labels: list[str] | None = None  # the input's tokens, for token axes
        self._order: list[Key] = []
        self._notes: dict[str, QLabel] = {}   # captured layers that did not run
        self._shown: list[QWidget] = []       # the column's widgets, in order
        self._selected: str | None = None
        #: Each layer's chosen view by path; the window points it at the session's view state.
        self.view_choices: dict[str, dict] = {}
        self._view_worker: ViewWorker | None = None

        self.empty_label = QLabel(
            "No activations yet. Tick the layers you want to see in the module tree "
            "(the ✓ capture column) and run the model.", self)
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
        self._heights_timer = QTimer(self, singleShot=True, interval=0)
        self._heights_timer.timeout.connect(self._fit_heights)

    # -- public API ------------------------------------------------------------
    @property
    def view_worker(self) -> ViewWorker | None:
        """Where the panels make the pictures a result did not bring ready (a view switched,
        a resize, a zoom); ``None``: on the GUI thread (a figure written without a window)."""
        return self._view_worker

    @view_worker.setter
    def view_worker(self, worker: ViewWorker | None) -> None:
        self._view_worker = worker
        for panel in self._panels.values():
            panel.view_worker = worker

    def shape_views(self) -> ShapeViews:
        """What every panel shows (view, log scale, size in pixels, leaf), as plain data a
        run request carries so its result comes with their pictures ready; a layer without
        a panel yet, its stored choice at the size of a panel of this column."""
        by_call = {key: panel.shape_wanted() for key, panel in self._panels.items()}
        height, width = self._new_plot_pixels()
        by_path = {path: ShapeWanted(_str_or_none(c.get("view")), _bool_or_none(c.get("log")),
                                     height, width)
                   for path, c in self.view_choices.items() if isinstance(c, dict)}
        return ShapeViews(by_call, by_path, ShapeWanted(None, None, height, width))

    def _new_plot_pixels(self) -> tuple[int, int]:
        """The device pixels of a new panel's view plot: as the others', else half the
        column's width at the least plot height."""
        for panel in self._panels.values():
            if panel.view_widget.width() > 50:
                return panel.wide.pixel_size()
        ratio = self.devicePixelRatioF()
        return int(PLOT_HEIGHT * ratio), int(self._panel_width(fits=True) / 2 * ratio)

    def set_token_labels(self, labels: list[str] | None) -> None:
        """The input's token strings for every tokens view (now and for new panels)."""
        self._token_labels = labels
        for panel in self._panels.values():
            panel.set_token_labels(labels)

    def show_result(self, result: RunResult, pairs: LayerPairs | None = None) -> None:
        """Show ``result``'s captures, reusing the panels of keys seen before (with the
        numbers its runner made display-ready, where it did). ``pairs``: model A against
        model B at some layers (an open comparison's): those layers' panels show them in
        place of the run's records, first in the column where the run did not capture them."""
        ready = result.display if isinstance(result.display, ResultDisplay) else None
        keys: list[Key] = []
        shown: list[QWidget] = []
        not_run: list[str] = []
        for path, records, display in _sources(result.captures, ready, pairs):
            if not records:
                not_run.append(path)
                shown.append(self._notes.get(path) or self._new_note(path))
            for rec in records:
                key = (path, rec.call)
                keys.append(key)
                panel = self._panels.get(key)
                if panel is None:
                    panel = self._new_panel(path, rec.call)
                show_leaves(panel, rec, display)  # a nested output: a leaf chooser
                shown.append(panel)
        for key in [k for k in self._panels if k not in set(keys)]:
            self._drop(self._panels.pop(key))
        for path in [p for p in self._notes if p not in not_run]:
            self._drop(self._notes.pop(path))
        self._order = keys
        if shown != self._shown:
            self._relayout(shown)
            self._fit_heights()
            self._flush_later()  # new panels that the layout brings into view
        # Again once laid out: a panel's statistics may have gained or lost a line.
        self._fit_heights_later()
        self.empty_label.setVisible(not shown)
        if self._selected is not None:
            self._highlight(self._selected)

    def clear(self) -> None:
        """Remove every panel (e.g. when another model is opened)."""
        for w in [*self._panels.values(), *self._notes.values()]:
            self._drop(w)
        self._panels.clear()
        self._notes.clear()
        self._order = []
        self._shown = []
        self.empty_label.setVisible(True)

    def panels(self) -> dict[Key, LayerPlot]:
        """The panels by ``(path, call)``, in display order."""
        return {k: self._panels[k] for k in self._order if k in self._panels}

    def notes(self) -> dict[str, QLabel]:
        """The "did not run" notes by layer path (captured layers with no call)."""
        return dict(self._notes)

    def select(self, path: str) -> bool:
        """Highlight ``path``'s panels (or its "did not run" note) and scroll to the
        first; ``False`` if it has neither."""
        self._selected = path
        first = self._highlight(path)
        if first is None:
            return False
        self.scroll.ensureWidgetVisible(first, 0, 10)
        if first.height() > self.scroll.viewport().height():
            # taller than the view: Qt would centre it; its title (which layer) comes first
            self.scroll.verticalScrollBar().setValue(first.y() - self._column.spacing())
        return True

    def export_figure(self, path: str | Path, beside: QWidget | None = None) -> Path:
        """Every panel, as one figure: a PNG, or an SVG whose plots stay vector
        drawings (File → Export figure), with ``beside`` (the output) on the right.
        Panels scrolled away are drawn too; the panels' controls and the selected
        panel's frame are left out (see :mod:`.figure_export`)."""
        if Path(path).suffix.lower() not in FIGURE_SUFFIXES:
            raise HookscopeError(f"{Path(path).name}: export the figure as .png or .svg")
        if not self._shown:
            raise HookscopeError("nothing to export yet: run the model first (Ctrl+R)")
        for panel in self._panels.values():   # scrolled-away panels may not be drawn yet
            if panel._stale and panel.record is not None:
                panel._draw(panel.record, here=True)   # the figure is written right after
        parts = [self._content] + ([beside] if beside is not None and beside.isVisible() else [])
        return write_figure(path, parts, "Hookscope activations")

    def flush_visible(self) -> int:
        """Draw the panels that came into view since their last record; returns how many."""
        return sum(panel.flush() for panel in self._panels.values())

    def resizeEvent(self, event) -> None:  # noqa: N802 - Qt override
        super().resizeEvent(event)
        self._fit_heights()
        self._fit_heights_later()   # again once the panels have their new widths
        self._flush_later()

    def _fit_heights(self) -> None:
        """Let the panels share the viewport's height: a few panels fill it (no empty
        band below them in a tall window), many keep :data:`PLOT_HEIGHT` and scroll.
        A plot is never taller than :data:`MAX_ASPECT` times its width."""
        panels = [w for w in self._shown if isinstance(w, LayerPlot)]
        if not panels:
            return
        notes = sum(w.sizeHint().height() for w in self._shown if not isinstance(w, LayerPlot))
        margins = self._column.contentsMargins()
        used = (notes + self._column.spacing() * (len(self._shown) - 1)
                + margins.top() + margins.bottom() + _SLACK)
        chrome = [_chrome_height(p) for p in panels]
        rows = [2 if p.is_stacked() else 1 for p in panels]
        room = (self.scroll.viewport().height() - used - sum(chrome)) / sum(rows)
        width = self._panel_width(fits=room >= PLOT_HEIGHT)
        for p, r in zip(panels, rows):
            plot_width = p.hist_widget.width() if p.hist_widget.width() > 50 else (
                width if r == 2 else width / 2)
            _set_plot_height(p, min(room, MAX_ASPECT * plot_width))

    def _panel_width(self, fits: bool) -> int:
        """A panel's width: the viewport's, less the column's margins and, when the
        panels will not fit, the vertical scroll bar that then appears."""
        margins = self._column.contentsMargins()
        bar = self.scroll.verticalScrollBar()
        full = self.scroll.viewport().width() + (bar.width() if bar.isVisible() else 0)
        return full - margins.left() - margins.right() - (0 if fits else bar.sizeHint().width())

    def showEvent(self, event) -> None:  # noqa: N802 - Qt override
        super().showEvent(event)
        self._flush_later()

    # -- internals -------------------------------------------------------------
    def _flush_later(self, *_args) -> None:
        self._flush_timer.start()

    def _fit_heights_later(self) -> None:
        self._heights_timer.start()

    def _new_panel(self, path: str, call: int) -> LayerPlot:
        panel = LayerPlot(path, call, self._content, self.session)
        panel.view_worker = self._view_worker
        panel.set_token_labels(self._token_labels)
        panel.set_view_choice(self.view_choices.get(path))
        panel.viewChosen.connect(lambda choice, p=path: self._chose_view(p, choice))
        panel.stackingChanged.connect(self._fit_heights_later)
        panel.readout.connect(lambda text, p=path, c=call: self.readout.emit(
            f"{p} (call {c}) · {text}" if text else ""))
        self._panels[(path, call)] = panel
        return panel

    def _chose_view(self, path: str, choice: dict) -> None:
        self.view_choices[path] = choice
        for (p, _call), panel in self._panels.items():   # every call of the layer alike
            if p == path:
                panel.set_view_choice(choice)
        self.viewChosen.emit(path, choice)

    def _new_note(self, path: str) -> QLabel:
        note = QLabel(f"<b>{path}</b> did not run in this forward (0 calls): its parent uses "
                      "its weights directly, or it is skipped.", self._content)
        note.setObjectName(f"layerNotRun:{path}")
        note.setWordWrap(True)
        note.setFrameShape(QFrame.Shape.StyledPanel)
        note.setContentsMargins(6, 4, 6, 4)
        note.setStyleSheet("color: #555;")
        self._notes[path] = note
        return note

    def _drop(self, w: QWidget) -> None:
        self._column.removeWidget(w)
        w.hide()
        w.deleteLater()
        if w in self._shown:
            self._shown.remove(w)

    def _relayout(self, shown: list[QWidget]) -> None:
        """Put the panels and notes in the result's (model) order."""
        for w in self._shown:
            self._column.removeWidget(w)
        # Index 0 is the empty-state label; the stretch stays last.
        for i, w in enumerate(shown):
            self._column.insertWidget(1 + i, w)
            w.show()
        self._shown = shown

    def _highlight(self, path: str) -> QWidget | None:
        first: QWidget | None = None
        for key in self._order:
            panel = self._panels[key]
            on = key[0] == path
            if panel.highlighted != on:
                panel.set_highlighted(on)
            if on and first is None:
                first = panel
        for p, note in self._notes.items():
            on = p == path
            if note.property("highlighted") != on:  # a restyle is not free: only on change
                note.setProperty("highlighted", on)
                note.setStyleSheet("color: #555; border: 2px solid #1976d2;" if on else "color: #555;")
            if on and first is None:
                first = note
        return first
