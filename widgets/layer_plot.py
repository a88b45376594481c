"""One captured layer call, drawn: histogram with draggable clamp bounds, a
view chosen by the tensor's shape, and its statistics in words.

:class:`LayerPlot` creates every pyqtgraph item once, in ``__init__``, and
:meth:`LayerPlot.update_record` only moves data into them (``setData``,
``setOpts``, ``setImage``), so a Live drag that re-runs the model many times a
second costs no item churn. It draws what the core captured and never runs a
model.
"""

from __future__ import annotations

import math

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QRectF, Qt, QTimer, Signal
from PySide6.QtGui import QFont, QFontMetrics
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QVBoxLayout, QWidget

from hookscope.core import CaptureRecord, TensorStats

from .layer_tree_model import format_bound, format_shape
from .plot_style import index_axes, plain_axes, title_never_widens
from .views_by_shape import (MAX_CHANNELS, bars_values, full_size, side_by_side, symmetric_level,
                             view_image, view_kind)

PRE_COLOUR = (150, 170, 200)    # values before the intervention: light, behind
POST_COLOUR = (31, 119, 180)    # values the rest of the model saw
BOUND_COLOUR = (214, 39, 40)
OPEN_BOUND_COLOUR = (150, 150, 150)
_COLOUR_MAP = "CET-D1"          # diverging blue-white-red: zero is white
_PLOT_HEIGHT = 190
_BARS_TITLE = "light: before · dark: after"
_PRE_HEADROOM = 1.6    # histogram height over the "before" peak: its shape stays readable
_SPIKE_CAP = 8.0       # ... raised up to this many times that peak to show a clamp's spike
_HEADROOM = 1.35       # histogram height over its peak: the bound labels sit above the bars
_LABEL_TOP, _LABEL_LOW = 0.93, 0.8   # label heights (fraction of the plot), staggered if they'd meet
_MIN_IMAGE_PIXELS = 128   # a view not laid out yet still gets a readable picture


def _fmt(v: float) -> str:
    return format_bound(v) if math.isinf(v) else f"{v:.4g}"


def stats_text(stats: TensorStats | None, pre: TensorStats | None = None) -> str:
    """The statistics line of a panel, in plain words."""
    if stats is None:
        return "No statistics (the layer did not produce a tensor)."
    parts = [f"min {_fmt(stats.min)}", f"max {_fmt(stats.max)}", f"mean {_fmt(stats.mean)}",
             f"std {_fmt(stats.std)}"]
    text = " · ".join(parts)
    if stats.fraction_clamped is not None:
        text += f"<br>clamp changed {100 * stats.fraction_clamped:.1f}% of the {stats.count:,} values"
    if pre is not None:
        text += f"<br>before: min {_fmt(pre.min)} · max {_fmt(pre.max)} · mean {_fmt(pre.mean)}"
    bad = []
    if stats.nan_count:
        bad.append(f"{stats.nan_count:,} NaN")
    if stats.inf_count:
        bad.append(f"{stats.inf_count:,} Inf")
    if bad:
        text += f"<br><span style='color:#c62828'>contains {' and '.join(bad)}</span>"
    return text


def histogram_in(t, edges: np.ndarray) -> np.ndarray:
    """Counts of ``t``'s finite values in the bins ``edges`` (ends included)."""
    v = t.detach().reshape(-1).float().numpy()
    v = v[np.isfinite(v)]
    counts, _ = np.histogram(np.clip(v, edges[0], edges[-1]), bins=edges)
    return counts.astype(float)


class LayerPlot(QFrame):
    """Panel for one (layer path, call) of a run.

    ``clampDragged(lo, hi)`` is emitted while a bound line moves,
    ``clampEdited(lo, hi)`` when the drag ends; an open end is ``±inf``.
    """

    clampDragged = Signal(float, float)
    clampEdited = Signal(float, float)

    def __init__(self, path: str, call: int = 0, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.path, self.call = path, call
        self.setObjectName(f"layerPlot:{path}:{call}")
        self.setFrameShape(QFrame.Shape.StyledPanel)
        self.view_kind = "none"
        self.record: CaptureRecord | None = None
        self._bounds: tuple[float, float] | None = None   # the clamp as the plan has it
        self._data_range = (-1.0, 1.0)
        self._quiet = False
        self._highlighted = False
        self._stale = False   # a record arrived while scrolled away: not drawn yet
        self._drawn_size = (0, 0)  # the view's size when its image was pooled
        self._placed: tuple | None = None  # (bounds, data range) the lines were placed for
        self._note_placed: tuple | None = None  # (text, anchor, x, y) of the spike note
        self._bars_fit: tuple | None = None
        self._view_title: str | None = None   # the view's title in one line, if it has one
        self._title_form: str | None = None   # ... as set (one line, or two)  # (units, low, high) the bar view's range was fitted to
        self._resize_timer = QTimer(self, singleShot=True, interval=50)
        self._resize_timer.timeout.connect(self.flush)

        self.title = QLabel(self)
        self.title.setTextFormat(Qt.TextFormat.RichText)
        self.stats_label = QLabel(self)
        self.stats_label.setObjectName("statsLabel")
        self.stats_label.setTextFormat(Qt.TextFormat.RichText)
        self.stats_label.setWordWrap(True)

        # Histogram: before (light) and after (solid), two draggable bounds.
        self.hist_widget = pg.PlotWidget(self, background="w", axisItems=index_axes("left"))
        self.hist_widget.setMinimumHeight(_PLOT_HEIGHT)
        hp = plain_axes(self.hist_widget.getPlotItem())
        hp.setMenuEnabled(False)
        hp.setLabel("bottom", "value")
        hp.setLabel("left", "count")
        hp.getAxis("left").set_integer(True)  # no "1.5 values"
        hp.getViewBox().setMouseEnabled(x=False, y=False)
        self.hist_pre = pg.PlotDataItem(stepMode="center", fillLevel=0,
                                        brush=pg.mkBrush(*PRE_COLOUR, 150), pen=pg.mkPen(PRE_COLOUR))
        self.hist_post = pg.PlotDataItem(stepMode="center", fillLevel=0,
                                         brush=pg.mkBrush(*POST_COLOUR, 220), pen=pg.mkPen(POST_COLOUR))
        hp.addItem(self.hist_pre)
        hp.addItem(self.hist_post)
        self.lo_line = self._bound_line("low")
        self.hi_line = self._bound_line("high")
        hp.addItem(self.lo_line, ignoreBounds=True)
        hp.addItem(self.hi_line, ignoreBounds=True)
        # The bound lines run behind the bars: the values a clamp piles up at a
        # bound (its spike, the point of the lesson) sit right on the line.
        self.hist_pre.setZValue(1)
        self.hist_post.setZValue(2)
        # "↑ 4,096 at bound": a spike taller than the plot says how tall it is.
        self.spike_note = pg.TextItem("", color=(120, 20, 20), fill=(255, 255, 255, 210), anchor=(0, 0))
        self.spike_note.setZValue(3)
        self.spike_note.setVisible(False)
        hp.addItem(self.spike_note, ignoreBounds=True)
        # Labels pick their side by the room they have, which a resize or new range changes.
        hvb = hp.getViewBox()
        hvb.sigRangeChanged.connect(self._place_labels)
        hvb.sigResized.connect(self._place_labels)

        # The shape view: an image (heat map, feature maps, tokens) or bars.
        self.view_widget = pg.PlotWidget(self, background="w",
                                         axisItems=index_axes("bottom", "left", "top"))
        self.view_widget.setMinimumHeight(_PLOT_HEIGHT)
        vp = title_never_widens(plain_axes(self.view_widget.getPlotItem()))
        vp.setMenuEnabled(False)
        self.image = pg.ImageItem()
        self.image.setColorMap(pg.colormap.get(_COLOUR_MAP))
        self.bars_pre = pg.BarGraphItem(x=[0], height=[0], width=0.8,
                                        brush=pg.mkBrush(*PRE_COLOUR, 160), pen=pg.mkPen(None))
        self.bars_post = pg.BarGraphItem(x=[0], height=[0], width=0.5,
                                         brush=pg.mkBrush(*POST_COLOUR), pen=pg.mkPen(None))
        for item in (self.image, self.bars_pre, self.bars_post):
            vp.addItem(item)
            item.setVisible(False)
        # The colour scale of images: symmetric, white at zero. Shown only beside
        # images (see _configure_view); it only displays the levels, never sets them.
        self.colour_bar = pg.ColorBarItem(values=(-1.0, 1.0), colorMap=pg.colormap.get(_COLOUR_MAP),
                                          interactive=False, width=10, colorMapMenu=False)
        self.colour_bar.axis.enableAutoSIPrefix(False)
        self.colour_bar.axis.setSIPrefixEnableRanges(())
        self.colour_bar.hide()
        self._bar_level: float | None = None
        # Between the before and after halves of an image.
        self.separator = pg.InfiniteLine(angle=90, movable=False,
                                         pen=pg.mkPen((90, 90, 90), width=1, style=Qt.PenStyle.DashLine))
        self.separator.setVisible(False)
        vp.addItem(self.separator, ignoreBounds=True)
        self.none_label = QLabel("Statistics only: this run did not keep the tensor, "
                                 "so there is nothing to draw beyond the histogram.", self)
        self.none_label.setWordWrap(True)
        self.none_label.setAlignment(Qt.AlignmentFlag.AlignCenter)

        row = QHBoxLayout()
        row.addWidget(self.hist_widget, 1)
        row.addWidget(self.view_widget, 1)
        row.addWidget(self.none_label, 1)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(6, 4, 6, 4)
        layout.addWidget(self.title)
        layout.addLayout(row)
        layout.addWidget(self.stats_label)

    # -- public API ------------------------------------------------------------
    def plot_items(self) -> dict[str, object]:
        """Every pyqtgraph item of the panel (the same objects for its whole life)."""
        return {"hist_pre": self.hist_pre, "hist_post": self.hist_post, "lo_line": self.lo_line,
                "hi_line": self.hi_line, "spike_note": self.spike_note, "image": self.image, "bars_pre": self.bars_pre,
                "bars_post": self.bars_post, "separator": self.separator,
                "colour_bar": self.colour_bar}

    def update_record(self, record: CaptureRecord, bounds: tuple[float, float] | None = None) -> None:
        """Show ``record`` (one call of the layer) and the clamp ``bounds``, if any."""
        self.record = record
        stats = record.stats
        shape = record.shape
        self.view_kind = view_kind(shape, record.tensor is not None)
        what = f" · <span style='color:#b71c1c'>{record.intervention}</span>" if record.intervention else ""
        leaf = f" output {record.leaf}" if record.leaf else ""
        extra = ""
        if self.view_kind == "feature_maps" and shape and shape[1] > MAX_CHANNELS:
            extra = f" · first {MAX_CHANNELS} of {shape[1]} channels"
        self.title.setText(f"<b>{self.path}</b>{leaf} · call {record.call} · "
                           f"{format_shape(shape)}{what}{extra}")
        self.stats_label.setText(stats_text(stats, record.pre_stats))
        self._bounds = None if bounds is None else (float(bounds[0]), float(bounds[1]))
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
        self._fit_title()
        # An image pooled for a much smaller view (e.g. before the first layout) is
        # drawn again at the new size, once the resizing settles.
        w, h = self._drawn_size
        if self.record is not None and self.view_kind in ("heatmap", "feature_maps", "tokens") \
                and (self.view_widget.width() > 1.25 * w or self.view_widget.height() > 1.25 * h):
            self._stale = True
            self._resize_timer.start()

    def _draw(self, record: CaptureRecord) -> None:
        self._stale = False
        self._draw_histogram(record)
        self._draw_view(record)
        self.set_bounds(self._bounds)

    def set_bounds(self, bounds: tuple[float, float] | None) -> None:
        """Place the bound lines for ``bounds`` (``None``: no clamp) without emitting."""
        self._bounds = None if bounds is None else (float(bounds[0]), float(bounds[1]))
        placed = (self._bounds, self._data_range)
        if placed == self._placed and not (self.lo_line.moving or self.hi_line.moving):
            return  # already there: pens and labels re-made for nothing cost ~0.3 ms a panel
        self._placed = placed
        lo_d, hi_d = self._data_range
        span = max(hi_d - lo_d, 1e-6)
        # Open or far-away ends sit just outside the data, where they can be grabbed.
        far_lo, far_hi = lo_d - 0.05 * span, hi_d + 0.05 * span
        lo, hi = self._bounds if self._bounds else (-math.inf, math.inf)
        self._quiet = True
        try:
            self.lo_line.setBounds((None, None))  # old limits must not clip the new values
            self.hi_line.setBounds((None, None))
            for line, v, far, word in ((self.lo_line, lo, far_lo, "low"),
                                       (self.hi_line, hi, far_hi, "high")):
                beyond = (v < far) if word == "low" else (v > far)
                off_scale = beyond and abs(v - far) > 2 * span
                if not line.moving:  # never yank a line out from under the mouse
                    line.setValue(far if off_scale else v)
                open_end = math.isinf(v)
                colour = OPEN_BOUND_COLOUR if open_end else BOUND_COLOUR
                line.setPen(pg.mkPen(colour, width=1.5,
                                     style=Qt.PenStyle.DashLine if off_scale else Qt.PenStyle.SolidLine))
                if open_end:
                    line.label.setFormat(f"drag: {word} bound")
                elif off_scale:
                    line.label.setFormat(f"{word} {format_bound(v)} (off scale)")
                else:
                    line.label.setFormat(f"{word} {{value:.3g}}")
            self._update_line_limits()
        finally:
            self._quiet = False
        self._place_labels()

    def _place_labels(self, *_args) -> None:
        """Low's label left of the low line, high's right of the high line, so close
        bounds never label across each other; a label without room on its side
        (a line near the plot's edge) goes inside, and the low one steps down if
        the two would then meet."""
        vb = self.hist_widget.getPlotItem().getViewBox()
        (x0, x1), _ = vb.viewRange()
        width = vb.width() if vb.width() > 1 else 300.0
        scale = width / max(x1 - x0, 1e-12)
        spans = []
        for line, outside_left in ((self.lo_line, True), (self.hi_line, False)):
            px = (float(line.value()) - x0) * scale
            # A line out of view would show a clipped piece of its label at the edge.
            shown = -1.0 <= px <= width + 1.0
            if line.label.isVisible() != shown:
                line.label.setVisible(shown)
            text = line.label.textItem.boundingRect().width() + 6
            left = px >= text if outside_left else width - px < text
            # A little gap off the line: the bars a clamp piles up at it may touch it.
            anchor = (1.08, 0.5) if left else (-0.08, 0.5)
            spans.append((px - text, px) if left else (px, px + text))
            if line.label.anchors != [anchor, anchor]:
                line.label.anchors = [anchor, anchor]
                line.label.updatePosition()
        (a0, a1), (b0, b1) = spans
        # A spike's "↑ N at bound" note has the top line: the labels go one line down.
        down = _LABEL_TOP - _LABEL_LOW if self.spike_note.isVisible() else 0.0
        high_pos = _LABEL_TOP - down
        low_pos = (_LABEL_LOW if a0 < b1 and b0 < a1 else _LABEL_TOP) - down
        for line, pos in ((self.lo_line, low_pos), (self.hi_line, high_pos)):
            if line.label.orthoPos != pos:
                line.label.setPosition(pos)

    def bounds(self) -> tuple[float, float] | None:
        return self._bounds

    def set_highlighted(self, on: bool) -> None:
        self._highlighted = on
        self.setStyleSheet("LayerPlot { border: 2px solid #1976d2; }" if on else "")

    @property
    def highlighted(self) -> bool:
        return self._highlighted

    # -- drawing ---------------------------------------------------------------
    def _draw_histogram(self, record: CaptureRecord) -> None:
        stats, pre = record.stats, record.pre_stats
        ranges = []
        peaks = {}
        for item, s in ((self.hist_post, stats), (self.hist_pre, pre)):
            if s is None or s.count == 0 or len(s.hist_edges) != len(s.hist_counts) + 1:
                item.setData([0.0, 1.0], [0.0])
                item.setVisible(False)
                continue
            edges = np.asarray(s.hist_edges, dtype=float)
            counts = np.asarray(s.hist_counts, dtype=float)
            if item is self.hist_post and pre is not None and record.tensor is not None \
                    and len(pre.hist_edges) > 1 \
                    and not np.array_equal(s.hist_edges, pre.hist_edges) \
                    and pre.hist_edges[0] <= s.min and s.max <= pre.hist_edges[-1]:
                # Before and after in the same bins, so the two are comparable and the
                # values a clamp piled up at its bounds show as spikes there. The core
                # already bins a clamp's output this way on the worker; this is for
                # other interventions.
                edges = np.asarray(pre.hist_edges, dtype=float)
                counts = histogram_in(record.tensor, edges)
            item.setData(edges, counts)
            item.setVisible(True)
            ranges.append((float(edges[0]), float(edges[-1])))
            if counts.size:
                i = int(np.argmax(counts))
                peaks[item] = (float(counts[i]), 0.5 * float(edges[i] + edges[i + 1]))
        if ranges:
            self._data_range = (min(r[0] for r in ranges), max(r[1] for r in ranges))
        self._fit_histogram(peaks.get(self.hist_pre), peaks.get(self.hist_post),
                            at_bound=record.intervention is not None and self._bounds is not None)

    def _fit_histogram(self, pre_peak: tuple[float, float] | None,
                       post_peak: tuple[float, float] | None, at_bound: bool) -> None:
        """The count axis: room for the "before" shape and for the spike a clamp
        piles up at a bound, up to :data:`_SPIKE_CAP` times the "before" peak; a
        taller spike is cut there and labelled with its count."""
        vb = self.hist_widget.getPlotItem().getViewBox()
        note = None
        if pre_peak is not None:
            base = max(pre_peak[0], 1.0)
            top = max(_PRE_HEADROOM * base, 1.1 * (post_peak[0] if post_peak else 0.0))
            if top > _SPIKE_CAP * base:
                top = _SPIKE_CAP * base
                note = post_peak
            vb.enableAutoRange(x=True, y=False)
            vb.setYRange(0, top, padding=0)
        else:
            top = _HEADROOM * max(post_peak[0] if post_peak else 1.0, 1.0)
            vb.enableAutoRange(x=True, y=False)
            vb.setYRange(0, top, padding=0)
        if self.spike_note.isVisible() != (note is not None):
            self.spike_note.setVisible(note is not None)
        if note is not None:
            count, x = note
            # On top of the cut spike, kept inside the plot near its edges.
            lo_d, hi_d = self._data_range
            f = (x - lo_d) / (hi_d - lo_d) if hi_d > lo_d else 0.5
            placed = (f"↑ {count:,.0f} {'at bound' if at_bound else 'in one bin'}",
                      (min(max(f, 0.0), 1.0), 0), x, top)
            if placed != self._note_placed:  # a Live drag re-sends the same spike often
                self._note_placed = placed
                self.spike_note.setText(placed[0])
                self.spike_note.setAnchor(placed[1])
                self.spike_note.setPos(x, top)

    def _draw_view(self, record: CaptureRecord) -> None:
        kind = self.view_kind
        is_image = kind in ("heatmap", "feature_maps", "tokens")
        pre_t = record.pre_tensor if record.intervention else None
        extent = halves = None
        if kind == "bars":
            size, extent = self._draw_bars(record.tensor, pre_t)
        elif is_image:
            size, halves = self._draw_image(record.tensor, pre_t, kind)
        else:
            size = None
        # Axes, titles and zoom change only with the kind of picture, not on every
        # update: a Live drag then costs just the data transfer (and keeps a zoom).
        layout_key = (kind, pre_t is not None, size, halves)
        if layout_key != self._layout_key:
            self._layout_key = layout_key
            self._configure_view(kind, record.intervention if pre_t is not None else None, halves)
            self._bars_fit = None
        if extent is not None:
            self._fit_bars(*extent)

    _layout_key: tuple | None = None

    def _configure_view(self, kind: str, intervention: str | None,
                        halves: tuple[float, float, float, float] | None = None) -> None:
        """Axes, titles and range for a kind of picture; ``halves`` is
        ``(units per half, start of the after half, its end, separator x)`` for a
        before | after image."""
        is_image = kind in ("heatmap", "feature_maps", "tokens")
        self.view_widget.setVisible(kind != "none")
        self.none_label.setVisible(kind == "none")
        self.image.setVisible(is_image)
        self.bars_post.setVisible(kind == "bars")
        self.bars_pre.setVisible(kind == "bars" and intervention is not None)
        vp = plain_axes(self.view_widget.getPlotItem())
        vb = vp.getViewBox()
        # An image's halves are named on its top axis; bars say which shade is which.
        self._view_title = None if intervention is None or is_image else _BARS_TITLE
        self._title_form = None
        self._fit_title()
        vb.invertY(is_image)
        vb.setAspectLocked(kind == "feature_maps")
        two = is_image and halves is not None
        axes = kind != "feature_maps"
        vp.showAxes((axes, two, False, axes))
        top = vp.getAxis("top")
        if two:
            n, offset, end, sep = halves
            # "before" and "after" centred over their halves, the ticks below restart at 0.
            top.setTicks([[(n / 2, "before"), ((offset + end) / 2, "after")]])
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
        labels = {"bars": ("unit", "value"), "tokens": ("feature", "token"),
                  "heatmap": ("unit", "row")}.get(kind)
        if labels:
            vp.setLabel("bottom", labels[0])
            vp.setLabel("left", labels[1])
        # Units, features, tokens and rows are counted: whole-number ticks only.
        vp.getAxis("bottom").set_integer(True)
        vp.getAxis("left").set_integer(is_image)
        if kind != "bars":  # bars are fitted by _fit_bars
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

    def _draw_bars(self, tensor, pre_tensor) -> tuple[tuple[int, ...], tuple[int, float, float]]:
        """Feed the bars; returns the shape and ``(units, low, high)`` of what they show."""
        post = bars_values(tensor)
        x = np.arange(post.size, dtype=float)
        self.bars_post.setOpts(x=x, height=post, width=0.5 if pre_tensor is not None else 0.8)
        shown = [post]
        if pre_tensor is not None:
            pre = bars_values(pre_tensor)
            self.bars_pre.setOpts(x=x, height=pre, width=0.8)
            shown.append(pre)
        lo, hi = 0.0, 0.0  # bars grow from zero
        for v in shown:
            v = v[np.isfinite(v)]
            if v.size:
                lo, hi = min(lo, float(v.min())), max(hi, float(v.max()))
        return post.shape, (post.size, lo, hi)

    def _fit_bars(self, units: int, lo: float, hi: float) -> None:
        """Keep every bar in view without undoing a zoom for nothing.

        The range is re-fitted when the number of bars changes, or when the
        values (before and after) changed and no longer fit the view or fill
        less than a quarter of it. During a Live drag the light "before" bars do
        not change, so the view stays put unless the clamp moves values out of it.
        """
        vb = self.view_widget.getPlotItem().getViewBox()
        fit = (units, lo, hi)
        if fit == self._bars_fit:
            return
        (_x0, _x1), (y0, y1) = vb.viewRange()
        span = max(hi - lo, 1e-12)
        same_units = self._bars_fit is not None and self._bars_fit[0] == units
        self._bars_fit = fit
        if same_units and y0 <= lo and hi <= y1 and span >= 0.25 * (y1 - y0):
            return
        vb.enableAutoRange(x=False, y=False)
        pad = 0.06 * span
        if same_units:  # a zoom along the units stays
            vb.setYRange(lo - pad, hi + pad, padding=0)
        else:
            vb.setRange(xRange=(-0.6, units - 0.4), yRange=(lo - pad, hi + pad), padding=0)

    def _draw_image(self, tensor, pre_tensor, kind: str) -> tuple[tuple[int, ...], tuple | None]:
        """Feed the image; returns its size in activation units and, for before |
        after, the halves' geometry (see :meth:`_configure_view`)."""
        # Pool to the view's size in pixels (before | after share the width).
        ratio = self.view_widget.devicePixelRatioF()
        rows = max(_MIN_IMAGE_PIXELS, int(self.view_widget.height() * ratio))
        cols = max(_MIN_IMAGE_PIXELS, int(self.view_widget.width() * ratio))
        if pre_tensor is not None:
            cols = max(_MIN_IMAGE_PIXELS, cols // 2)
        post = view_image(tensor, kind, rows, cols)
        pre = view_image(pre_tensor, kind, rows, cols) if pre_tensor is not None else None
        level = symmetric_level(post, pre)
        gap = 0 if pre is None else max(2, pre.shape[1] // 16)
        img = post if pre is None else side_by_side(pre, post, gap=gap)
        img = np.clip(img, -level, level)  # ±Inf drawn as the extreme colour; NaN stays blank
        # pyqtgraph images are indexed [x, y]: transpose rows × columns.
        self.image.setImage(img.T, levels=(-level, level), autoLevels=False)
        if level != self._bar_level:  # its axis is laid out again: only on a change
            self._bar_level = level
            self.colour_bar.setLevels((-level, level))
        # Axes count the activation's rows and columns, not the pooled pixels.
        full = full_size(tuple(tensor.shape), kind)
        sy, sx = (1.0, 1.0) if full is None else (full[0] / post.shape[0], full[1] / post.shape[1])
        self.image.setRect(QRectF(0, 0, img.shape[1] * sx, img.shape[0] * sy))
        self._drawn_size = (self.view_widget.width(), self.view_widget.height())
        halves = None
        if pre is not None:
            n = pre.shape[1] * sx
            halves = (round(n, 6), round((pre.shape[1] + gap) * sx, 6), round(img.shape[1] * sx, 6),
                      round((pre.shape[1] + gap / 2) * sx, 6))
        return (round(img.shape[0] * sy), round(img.shape[1] * sx)), halves

    # -- dragging --------------------------------------------------------------
    def _bound_line(self, word: str) -> pg.InfiniteLine:
        line = pg.InfiniteLine(angle=90, movable=True, pen=pg.mkPen(BOUND_COLOUR, width=1.5),
                               hoverPen=pg.mkPen(BOUND_COLOUR, width=4),
                               label=f"{word} {{value:.3g}}",
                               labelOpts={"position": _LABEL_TOP,
                                          "color": (60, 60, 60), "fill": (255, 255, 255, 200)})
        line.setToolTip(f"Drag to change the clamp's {word} bound")
        line.sigPositionChanged.connect(lambda _l: self._on_line_moved(word, finished=False))
        line.sigPositionChangeFinished.connect(lambda _l: self._on_line_moved(word, finished=True))
        return line

    def _on_line_moved(self, word: str, finished: bool) -> None:
        """A bound line moved (by the mouse): report the clamp it now describes.

        Only the moved bound changes; the other keeps the plan's value, so an
        open end (``±inf``) stays open.
        """
        if self._quiet:
            return
        self._placed = None  # the lines are no longer where set_bounds put them
        lo, hi = self._bounds if self._bounds else (-math.inf, math.inf)
        if word == "low":
            lo = min(float(self.lo_line.value()), hi)
        else:
            hi = max(float(self.hi_line.value()), lo)
        self._update_line_limits()
        self._place_labels()
        if finished:
            self._bounds = (lo, hi)
            self.clampEdited.emit(lo, hi)
        else:
            self.clampDragged.emit(lo, hi)

    def _update_line_limits(self) -> None:
        """Each line stops at the other, so low never passes high."""
        quiet, self._quiet = self._quiet, True
        try:
            lo_v, hi_v = float(self.lo_line.value()), float(self.hi_line.value())
            self.lo_line.setBounds((None, hi_v))
            self.hi_line.setBounds((lo_v, None))
        finally:
            self._quiet = quiet
