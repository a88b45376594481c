"""One captured layer call, drawn: histogram with draggable clamp bounds, a
view chosen by the tensor's shape, and its statistics in words.

:class:`LayerPlot` creates every pyqtgraph item once, in ``__init__``, and
:meth:`LayerPlot.update_record` only moves data into them (``setData``,
``setOpts``, ``setImage``), so a Live drag that re-runs the model many times a
second costs no item churn. It draws what the core captured and never runs a
model. The panel is made of parts with their own jobs: the histogram and its
bound lines are a :class:`HistogramView` (histogram_view.py), the shape view's
pictures (maps, bars, norms, top-k, a zoom re-pooled at full resolution, the
log colour scale) a :class:`WideDrawing` (wide_drawing.py), the view picked in
a :class:`ViewChooser`. This file holds the panel: what to draw, the view's
axes and titles, and its text. The shape view's numbers come with the record
(its result's ``RecordDisplay.shape``, made on the runner's thread for what
:meth:`LayerPlot.shape_wanted` said the panel shows); where they no longer
match (a view switched, a resize, the log scale toggled) they are made again
by the window's :class:`~.view_worker.ViewWorker`, never on the GUI thread.
"""

from __future__ import annotations

from functools import partial

import pyqtgraph as pg
from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtGui import QFont, QFontMetrics
from PySide6.QtWidgets import QBoxLayout, QFrame, QHBoxLayout, QLabel, QVBoxLayout, QWidget

from hookscope.core import CaptureRecord, Session
from hookscope.core.engine import reference_of, version_names
from hookscope.core.views import (MAX_CHANNELS, TOP_K, RecordDisplay, ShapeDisplay, ShapeWanted,
                                  ValueSpread, largest_finite, shape_display, view_kind, wide_views)

from .histogram_view import (BOUND_COLOUR, OPEN_BOUND_COLOUR, PLOT_HEIGHT, POST_COLOUR, PRE_COLOUR,
                             HistogramView)
from .value_format import format_shape
from .plot_readouts import bar_cell, image_cell, tensor_rows
from .plot_style import index_axes, plain_axes, title_never_widens
from .plot_tools import PlotTools, save_png
from .stats_text import pair_text, stats_text
from .view_chooser import ViewChooser
from .view_worker import ViewWorker
from .wide_drawing import WideDrawing

# Still importable from here, where they were before the histogram moved out.
__all__ = ["BOUND_COLOUR", "OPEN_BOUND_COLOUR", "POST_COLOUR", "PRE_COLOUR", "LayerPlot",
           "stats_text"]

#: Narrower than this, a panel stacks its histogram above its view: side by side
#: each would get less than ~300 px, too little to read or to drag a bound on.
STACK_BELOW = 620


class LayerPlot(QFrame):
    """Panel for one (layer path, call) of a run.

    Its histogram's bound lines show and edit the bounds of the layer's
    intervention in ``session``'s plan (without one, a session of its own that
    only holds edits). ``viewChosen(choice)`` when the person picks a view or the log scale
    (``{"view": ..., "log": ...}``, kept in the session's view state).
    """

    readout = Signal(str)   # what the cursor points at ("" when it left the plots)
    stackingChanged = Signal()
    viewChosen = Signal(object)

    def __init__(self, path: str, call: int = 0, parent: QWidget | None = None,
                 session: Session | None = None) -> None:
        super().__init__(parent)
        self.session = session if session is not None else Session(runner_factory=None)
        self.path, self.call = path, call
        self.setObjectName(f"layerPlot:{path}:{call}")
        self.setFrameShape(QFrame.Shape.StyledPanel)
        self.view_kind = "none"
        self.record: CaptureRecord | None = None
        self._prepared: RecordDisplay | None = None   # the record's numbers from the runner's thread
        self._view_worker: ViewWorker | None = None   # where its pictures are made (None: here)
        self._highlighted = False
        self._stale = False   # a record arrived while scrolled away: not drawn yet
        self._layout_key: tuple | None = None   # the kind of picture the axes are set up for
        self._view_title: str | None = None   # the view's title in one line, if it has one
        self._title_form: str | None = None   # ... as set (one line, or two)
        self._resize_timer = QTimer(self, singleShot=True, interval=50)
        self._resize_timer.timeout.connect(self.flush)
        self.shown_view = "map"   # the view drawn: map, row_norm, unit_norm or top_k
        self.chooser = ViewChooser(self)
        self.chooser.changed.connect(self._on_choice)

        self.title = QLabel(self)
        self.title.setTextFormat(Qt.TextFormat.RichText)
        # Beside the view chooser a long title wraps rather than widen the panel
        # past its scroll area (the plots would be cut off at the right).
        self.title.setWordWrap(True)
        self.title.setMinimumWidth(120)
        self.stats_label = QLabel(self)
        self.stats_label.setObjectName("statsLabel")
        self.stats_label.setTextFormat(Qt.TextFormat.RichText)
        self.stats_label.setWordWrap(True)

        # Histogram: before (light) and after (solid), two draggable bounds. Its
        # items stay reachable as the panel's own (tests, plot_items).
        self.histogram = HistogramView(self, self.session, path)
        self.hist_widget = self.histogram.widget
        self.hist_pre, self.hist_post = self.histogram.hist_pre, self.histogram.hist_post
        self.lo_line, self.hi_line = self.histogram.lo_line, self.histogram.hi_line
        self.spike_note = self.histogram.spike_note

        # The shape view: an image (heat map, feature maps, tokens) or bars.
        self.view_widget = pg.PlotWidget(self, background="w",
                                         axisItems=index_axes("bottom", "left", "top"))
        self.view_widget.setMinimumHeight(PLOT_HEIGHT)
        vp = title_never_widens(plain_axes(self.view_widget.getPlotItem()))
        vp.setMenuEnabled(False)
        # Its pictures (image, bars, norms, colour bar): made once, fed on every update.
        self.wide = WideDrawing(self.view_widget)
        w = self.wide
        (self.image, self.bars_pre, self.bars_post, self.hbars_pre, self.hbars_post, self.norm_pre,
         self.norm_post, self.colour_bar) = (w.image, w.bars_pre, w.bars_post, w.hbars_pre,
                                             w.hbars_post, w.norm_pre, w.norm_post, w.colour_bar)
        # A zoom or pan of a map pools the part in view again, once the range settles.
        self._range_timer = QTimer(self, singleShot=True, interval=30)
        self._range_timer.timeout.connect(self.wide.repool)
        vp.getViewBox().sigRangeChanged.connect(lambda *_a: self._range_timer.start())
        # Between the before and after halves of an image.
        self.separator = pg.InfiniteLine(angle=90, movable=False,
                                         pen=pg.mkPen((90, 90, 90), width=1, style=Qt.PenStyle.DashLine))
        self.separator.setVisible(False)
        vp.addItem(self.separator, ignoreBounds=True)
        self._ref_label = "before"  # what the light series is: "before" its intervention, "without" any, "A"
        self._names = ("before", "after")   # the light and dark series' names (core's version_names)
        name = f"{path or 'model'}-call{call}"
        self.hist_tools = self.histogram.tools
        self.hist_tools.name = f"{name}-histogram"
        self.view_tools = PlotTools(self.view_widget, f"{name}-view", {vp.getViewBox(): (True, True)},
                                    self._view_text, self._view_rows, self._reset_view)
        for tools in (self.hist_tools, self.view_tools):
            tools.readout.connect(self.readout)
        self.none_label = QLabel("Statistics only: this run did not keep the tensor, "
                                 "so there is nothing to draw beyond the histogram.", self)
        self.none_label.setWordWrap(True)
        self.none_label.setAlignment(Qt.AlignmentFlag.AlignCenter)

        row = self._row = QBoxLayout(QBoxLayout.Direction.LeftToRight)
        row.addWidget(self.hist_widget, 1)
        row.addWidget(self.view_widget, 1)
        row.addWidget(self.none_label, 1)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(6, 4, 6, 4)
        header = self._header = QHBoxLayout()
        header.setContentsMargins(0, 0, 0, 0)
        header.addWidget(self.title, 1)
        header.addWidget(self.chooser)
        layout.addLayout(header)
        layout.addLayout(row)
        layout.addWidget(self.stats_label)

    # -- public API ------------------------------------------------------------
    @property
    def view_worker(self) -> ViewWorker | None:
        """The thread that makes the pictures not prepared by the runner, and a zoom's
        (``None``: made here, on the GUI thread: a panel on its own, a figure file)."""
        return self._view_worker

    @view_worker.setter
    def view_worker(self, worker: ViewWorker | None) -> None:
        self._view_worker = self.wide.worker = worker

    def plot_items(self) -> dict[str, object]:
        """Every pyqtgraph item of the panel (the same objects for its whole life)."""
        return {"hist_pre": self.hist_pre, "hist_post": self.hist_post, "lo_line": self.lo_line,
                "hi_line": self.hi_line, "spike_note": self.spike_note, "image": self.image, "bars_pre": self.bars_pre,
                "bars_post": self.bars_post, "separator": self.separator,
                "colour_bar": self.colour_bar, "hbars_pre": self.hbars_pre,
                "hbars_post": self.hbars_post, "norm_pre": self.norm_pre, "norm_post": self.norm_post}

    def update_record(self, record: CaptureRecord, prepared: RecordDisplay | None = None) -> None:
        """Show ``record`` (one call of the layer); ``prepared``: its display-ready numbers,
        made in the runner's thread (``None``: made here). The bound lines follow the
        session's plan."""
        self.record = record
        self._prepared = prepared
        stats = record.stats
        shape = record.shape
        self.view_kind = view_kind(shape, record.tensor is not None)
        self.chooser.set_offer(wide_views(shape, self.view_kind), self.view_kind)
        self.shown_view = self.chooser.effective_view()
        what = f" · <span style='color:#b71c1c'>{record.intervention}</span>" if record.intervention else ""
        leaf = f" output {record.leaf}" if record.leaf else ""
        extra = ""
        if self.shown_view == "map" and self.view_kind == "feature_maps" and shape \
                and shape[1] > MAX_CHANNELS:
            extra = f" · first {MAX_CHANNELS} of {shape[1]} channels"
        elif self.shown_view == "top_k" and shape:
            units = shape[1] if self.view_kind == "feature_maps" else shape[-1]
            extra = f" · top {min(TOP_K, units)} of {units:,} units"
        pair = " · <b>A</b> against <b>B</b>" if record.pair is not None else ""
        self.title.setText(f"<b>{self.path}</b>{leaf} · call {record.call} · "
                           f"{format_shape(shape)}{what}{extra}{pair}")
        _, ref_stats, self._ref_label = reference_of(record)
        self._names = version_names(record)
        iv = record.intervention_obj
        self.stats_label.setText(
            pair_text(stats, ref_stats, record.pair) if record.pair is not None else
            stats_text(stats, ref_stats, self._ref_label,
                       iv.name if iv is not None else "the intervention"))
        if self.is_scrolled_away():
            # Drawn when scrolled into view (flush): a result's update then costs
            # only the panels a person can see.
            self._stale = True
            return
        self._draw(record)

    def is_scrolled_away(self) -> bool:
        """Shown in a window, but wholly outside the visible part of a scroll area."""
        return self.isVisible() and self.visibleRegion().isEmpty()

    def flush(self) -> bool:
        """Draw the latest record if it was left for later; ``True`` if it drew."""
        if not self._stale or self.record is None or self.is_scrolled_away():
            return False
        self._draw(self.record)
        return True

    def resizeEvent(self, event) -> None:  # noqa: N802 - Qt override
        super().resizeEvent(event)
        direction = (QBoxLayout.Direction.TopToBottom if self.width() < STACK_BELOW
                     else QBoxLayout.Direction.LeftToRight)
        if self._row.direction() != direction:
            self._row.setDirection(direction)
            self.stackingChanged.emit()
        self._fit_title()
        # An image pooled for a much smaller view (e.g. before the first layout) is
        # drawn again at the new size, once the resizing settles.
        w, h = self.wide.drawn_size
        if self.record is not None and self.view_kind in ("heatmap", "feature_maps", "tokens") \
                and (self.view_widget.width() > 1.25 * w or self.view_widget.height() > 1.25 * h):
            self._stale = True
            self._resize_timer.start()

    def _draw(self, record: CaptureRecord, here: bool = False) -> None:
        self._stale = False
        pre_t, pre_stats, _ = reference_of(record)
        # Each tensor drawn with its statistics, whose exact min and max spare
        # the log-scale test a read of every value.
        drawn = [(t, s) for t, s in ((record.tensor, record.stats), (pre_t, pre_stats)) if t is not None]
        tensors = [t for t, _s in drawn]
        prep = self._prepared
        spread = prep.spread if prep is not None else \
            ValueSpread(*tensors, largest=largest_finite(*(s for _t, s in drawn)))
        self.chooser.set_decades(spread.decades)
        log = self.chooser.log_on()
        scale = spread.typical if log else 1.0
        self.histogram.set_log(log, tensors, scale, prep.log_bins if prep is not None else None)
        self.wide.set_map_log(log, scale)
        self.histogram.draw(record, prep)
        self._draw_view(record, here)

    def bounds(self) -> tuple[float, float] | None:
        """The layer's bounds as the session's plan has them (what the lines show)."""
        return self.histogram.lines.bounds()

    def is_stacked(self) -> bool:
        """The histogram sits above the view (a narrow panel), not beside it."""
        return self._row.direction() == QBoxLayout.Direction.TopToBottom

    def set_plot_height(self, height: float) -> None:
        """Both plots' height (at least :data:`PLOT_HEIGHT`): the activation panel
        lets its panels grow into a tall window instead of leaving it empty."""
        height = max(PLOT_HEIGHT, int(height))
        for w in (self.hist_widget, self.view_widget, self.none_label):
            if w.minimumHeight() != height:
                w.setMinimumHeight(height)

    def set_highlighted(self, on: bool) -> None:
        self._highlighted = on
        self.setStyleSheet("LayerPlot { border: 2px solid #1976d2; }" if on else "")

    @property
    def highlighted(self) -> bool:
        return self._highlighted

    # -- readouts, export, zoom ----------------------------------------------------
    def _view_text(self, _vb, point) -> str | None:
        if self.shown_view in ("row_norm", "unit_norm") and self.view_kind != "none" \
                and not (self.shown_view == "row_norm" and self.view_kind == "feature_maps"):
            what = {"tokens": ("token", "feature"), "feature_maps": ("position", "channel")}.get(
                self.view_kind, ("row", "unit"))
            horizontal = self.shown_view == "row_norm"
            return self.wide.norm_text(point.x(), point.y(), what[0 if horizontal else 1], horizontal,
                                       self._ref_label)
        if self.view_kind == "bars" and self.wide.bars is not None:
            return bar_cell(point.x(), *self.wide.bars)
        if self.view_kind in ("heatmap", "feature_maps", "tokens") and self.wide.drawn is not None:
            return image_cell(self.wide.drawn, point.x(), point.y())
        return None

    def _view_rows(self) -> tuple[list[str], list[list]]:
        rec = self.record
        if rec is None:
            return ["note"], [["nothing drawn yet"]]
        pre, _, label = reference_of(rec)
        drawn = self.wide.drawn.image if self.wide.drawn is not None else None
        return tensor_rows(rec.tensor, pre, self.view_kind, drawn, label or "before",
                           pair=rec.pair is not None)

    def _reset_view(self) -> None:
        """Undo a zoom of the shape view: its fitted range again."""
        self._layout_key = None
        self.wide.forget_fits()
        if self.record is not None:
            self._draw_view(self.record)

    def export(self, path: str) -> str:
        """The whole panel (title, both plots, statistics) as a PNG."""
        return str(save_png(self, path))  # whole or not at all

    # -- drawing ---------------------------------------------------------------
    def _draw_view(self, record: CaptureRecord, here: bool = False) -> None:
        """Draw the shape view of ``record``: its prepared numbers where they match what
        the panel shows now (view, size, colour scale), else made again, by the view
        worker where the panel has one (the picture drawn stays until they arrive); ``here``:
        made at once on this thread (a figure written now)."""
        kind, view = self.view_kind, self.shown_view
        tensor = record.tensor  # None only where view_kind() said "none"
        if tensor is None or kind == "none":
            self._show_shape(record, None)
            return
        height, width = self.wide.pixel_size()
        log_scale = self.wide.log_scale()
        prep = self._prepared.shape if self._prepared is not None else None
        if prep is not None and prep.fits(kind, view, height, width, log_scale):
            self._show_shape(record, prep)
            return
        job = partial(shape_display, tensor, reference_of(record)[0], kind, view, height, width,
                      log_scale)
        if self.view_worker is None or here:
            self._show_shape(record, job())
            return

        def arrived(d: ShapeDisplay | None) -> None:
            # Dropped if the panel moved on: another record, view or scale since.
            if d is not None and self.record is record and (d.kind, d.view, d.log_scale) == \
                    (self.view_kind, self.shown_view, self.wide.log_scale()):
                self._show_shape(record, d)

        self.view_worker.submit(self, job, arrived)

    def _show_shape(self, record: CaptureRecord, d: ShapeDisplay | None) -> None:
        """Move ``d`` into the pictures; axes, titles and zoom follow the kind drawn."""
        w = self.wide
        pre_t = reference_of(record)[0]  # before its own intervention, or the run without any
        if d is None:
            size = extent = halves = None
            shown, w.map_source = "none", None
        else:
            size, extent, halves, shown = w.show(d)
        # Axes, titles and zoom change only with the kind of picture, not on every
        # update: a Live drag then costs just the data transfer (and keeps a zoom).
        layout_key = (shown, pre_t is not None, self._ref_label, size, halves, w.log_map)
        if layout_key != self._layout_key:
            self._layout_key = layout_key
            self._configure_view(shown, self._ref_label if pre_t is not None else None, halves)
            w.forget_fits()
        if extent is not None:
            w.fit_bars(*extent)
        if shown == "row_norm":
            w.fit_hbars()
        if w.map_source is not None:
            w.repool()   # a zoomed map shows its part in view at full resolution
        self._apply_token_labels()
        w.apply_unit_labels(halves, self.shown_view)

    def shape_wanted(self) -> ShapeWanted:
        """What this panel shows, for the next run to prepare (plain data)."""
        height, width = self.wide.pixel_size()
        return ShapeWanted(self.chooser.view, self.chooser.log, height, width,
                           self.record.leaf if self.record is not None else "")

    def set_view_choice(self, choice: dict | None) -> None:
        """Restore a stored view choice (``{"view": ..., "log": ...}``; ``None``: defaults)."""
        choice = choice if isinstance(choice, dict) else {}   # a session file's, as it was
        view, log = choice.get("view"), choice.get("log")
        if (view, log) == (self.chooser.view, self.chooser.log):
            return
        self.chooser.set_choice(view if isinstance(view, str) else None,
                                log if isinstance(log, bool) else None)
        self._redraw_for_choice()

    def _on_choice(self) -> None:
        self._redraw_for_choice()
        self.viewChosen.emit(self.chooser.choice())

    def _redraw_for_choice(self) -> None:
        if self.view_tools.is_zoomed:
            self.view_tools.reset_view()
        if self.record is not None:
            self.update_record(self.record, self._prepared)

    def set_token_labels(self, labels: list[str] | None) -> None:
        """The input's token strings, shown on a tokens view's token axis (``None``: numbers)."""
        if labels != self.wide.token_labels:
            self.wide.token_labels = labels
            self._apply_token_labels()

    def _apply_token_labels(self) -> None:
        self.wide.apply_token_labels(self.record.tensor if self.record is not None else None,
                                     self.view_kind, self.shown_view)

    def _configure_view(self, kind: str, compared: str | None,
                        halves: tuple[float, float, float, float] | None = None) -> None:
        """Axes, titles and range for a kind of picture; ``halves`` is
        ``(units per half, start of the after half, its end, separator x)`` for a
        before | after image; ``compared`` names the light series ("before" or
        "without"), ``None`` when the layer is drawn once."""
        intervention = compared
        is_image = kind in ("heatmap", "feature_maps", "tokens", "top_k", "position_norm")
        self.view_widget.setVisible(kind != "none")
        self.none_label.setVisible(kind == "none")
        self.image.setVisible(is_image)
        self.bars_post.setVisible(kind == "bars")
        self.bars_pre.setVisible(kind == "bars" and intervention is not None)
        self.norm_post.setVisible(kind == "unit_norm")
        self.norm_pre.setVisible(kind == "unit_norm" and intervention is not None)
        self.hbars_post.setVisible(kind == "row_norm")
        self.hbars_pre.setVisible(kind == "row_norm" and intervention is not None)
        vp = plain_axes(self.view_widget.getPlotItem())
        vb = vp.getViewBox()
        # An image's halves are named on its top axis; bars say which shade is which.
        names = self._names
        self._view_title = (None if intervention is None or is_image else
                            "light: without · dark: with the interventions"
                            if intervention == "without" else
                            f"light: {names[0]} · dark: {names[1]}")
        self._title_form = ""   # not a form: the next _fit_title sets the title (or clears it)
        self._fit_title()
        vb.invertY(is_image or kind == "row_norm")
        vb.setAspectLocked(kind in ("feature_maps", "position_norm"))
        two = is_image and halves is not None
        axes = kind != "feature_maps"
        vp.showAxes((axes, two, False, axes))
        top = vp.getAxis("top")
        if two:
            assert halves is not None  # two implies it
            n, offset, end, sep = halves
            # "before" and "after" centred over their halves, the ticks below restart at 0.
            top.setTicks([[(n / 2, names[0]), ((offset + end) / 2, names[1])]])
            top.setStyle(tickLength=0, showValues=True)
            top.setTextPen(pg.mkPen((60, 60, 60)))
            self.separator.setValue(sep)
        self.separator.setVisible(two)
        in_layout = self.colour_bar.isVisible()
        if is_image and not in_layout:
            vp.layout.addItem(self.colour_bar, 2, 5)
            vp.layout.setColumnFixedWidth(4, 4)
            self.colour_bar.show()
        elif not is_image and in_layout:
            vp.layout.removeItem(self.colour_bar)
            vp.layout.setColumnFixedWidth(4, 0)
            self.colour_bar.hide()
        vp.getAxis("bottom").set_halves((n, offset) if two and kind != "feature_maps" else None)
        row, unit = {"tokens": ("token", "feature"), "feature_maps": ("position", "channel")}.get(
            self.view_kind, ("row", "unit"))
        labels = {"bars": ("unit", "value"), "tokens": ("feature", "token"),
                  "heatmap": ("unit", "row"), "unit_norm": (unit, "L2 norm over the rows"
                                                            if row == "row" else f"L2 norm over {row}s"),
                  "row_norm": (f"L2 norm of each {row}'s vector", row),
                  "top_k": (f"{unit} (top {TOP_K} by mean |activation|, largest first)", row),
                  "position_norm": ("x (L2 norm over channels)", "y")}.get(kind)
        if labels:
            log = " (log)" if self.wide.log_map else ""
            vp.setLabel("bottom", labels[0] + (log if kind == "row_norm" else ""))
            vp.setLabel("left", labels[1] + (log if kind == "unit_norm" else ""))
        # Units, features, tokens and rows are counted: whole-number ticks only.
        vp.getAxis("bottom").set_integer(kind != "row_norm")
        vp.getAxis("left").set_integer(is_image or kind == "row_norm")
        if kind not in ("bars", "unit_norm", "row_norm"):  # bars are fitted by WideDrawing.fit_bars
            vp.autoRange(padding=0.02)

    def _fit_title(self) -> None:
        """Set the view's title on one line, or on two where the plot is narrower
        than the line: pyqtgraph gives a plot its title's width as a minimum, and
        a plot wider than its widget is cut off at the panel's right edge."""
        title = self._view_title
        form = None
        if title is not None:
            metrics = QFontMetrics(QFont(self.font().family(), 9))
            room = self.view_widget.width() - 60   # the value axis takes the rest
            form = title if metrics.horizontalAdvance(title) <= room else title.replace(" · ", "<br>")
        if form != self._title_form:
            self._title_form = form
            self.view_widget.getPlotItem().setTitle(form, size="9pt", color="#444")
