"""A layer's value histogram with two draggable clamp bounds, as one part of a
:class:`~hookscope.widgets.layer_plot.LayerPlot` panel.

:class:`HistogramView` owns the histogram's plot and its pyqtgraph items: the
"before" (light) and "after" (solid) histograms, the low and high bound lines
with their labels, and the note on a spike cut at the top. It creates them
once and only moves data into them. Its bound lines are a :class:`~.bound_lines.BoundLines`,
which reads and writes the bounds in the session's plan (no copy is kept here).

On a log scale (:meth:`HistogramView.set_log`) the counts are drawn as
``log10(1 + count)`` and, where the tensors are at hand, the values on a
signed-log axis (core's ``wide_views.signed_log``); the axes are labelled with
real counts and values, the readouts and the bounds stay real values.
"""

from __future__ import annotations

import math

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QObject
from PySide6.QtWidgets import QWidget

from hookscope.core.engine import reference_of, version_names
from hookscope.core import CaptureRecord, Session, TensorStats
from hookscope.core.views import (RecordDisplay, common_bins, count_ticks, log_counts, log_histogram,
                                  log_ticks, signed_exp, signed_log)

from .bound_lines import BOUND_COLOUR, OPEN_BOUND_COLOUR, BoundLines, snap  # noqa: F401 - importable here
from .plot_style import index_axes, plain_axes, set_label, set_ticks, title_never_widens
from .plot_tools import PlotTools

PRE_COLOUR = (150, 170, 200)    # values before the intervention: light, behind
POST_COLOUR = (31, 119, 180)    # values the rest of the model saw
PLOT_HEIGHT = 190               # the minimum height of a panel's plots
_PRE_HEADROOM = 1.6    # histogram height over the "before" peak: its shape stays readable
_SPIKE_CAP = 8.0       # ... raised up to this many times that peak to show a clamp's spike
_HEADROOM = 1.35       # histogram height over its peak: the bound labels sit above the bars
_X_PAD = 0.06          # view margin each side, as a fraction of the values' span


def sample_scale(s: TensorStats) -> float:
    """How many values each counted one stands for: 1, or the sampling factor
    when the core binned a sample of a large tensor."""
    counted = float(np.asarray(s.hist_counts).sum())
    finite = s.count - s.nan_count - s.inf_count
    return finite / counted if counted > 0 and s.hist_is_sample else 1.0


class HistogramView(QObject):
    """The histogram plot of one panel (``widget``) of layer ``path``, and its bound
    lines (:attr:`lines`), which follow and edit ``session``'s plan."""

    def __init__(self, parent: QWidget, session: Session, path: str) -> None:
        super().__init__(parent)
        self.data_range = (-1.0, 1.0)
        self._note_placed: tuple | None = None  # (text, anchor, x, y) of the spike note
        self._x_view: tuple[float, float] | None = None   # the x range set (None: not yet)
        self._series: dict[str, tuple[np.ndarray, np.ndarray]] = {}   # "before"/"after": edges, counts
        #: what the readouts and CSV rows call the light and dark series ("A" and "B" for two models)
        self.names: tuple[str, str] = ("before", "after")
        self.sampled = 1.0     # >1: counts scaled up from a sample of the values
        self.log_counts = False   # counts drawn as log10(1 + count)
        self.log_scale: float | None = None   # values drawn as signed_log(x, log_scale)
        self._log_tensors: list | None = None   # [after, before?] for the signed-log bins
        self._log_given: tuple | None = None    # ... or those bins, made in the runner's thread

        # Histogram: before (light) and after (solid), two draggable bounds.
        self.widget = pg.PlotWidget(parent, background="w", axisItems=index_axes("left"))
        self.widget.setMinimumHeight(PLOT_HEIGHT)
        hp = plain_axes(self.widget.getPlotItem())
        hp.setMenuEnabled(False)
        hp.setLabel("bottom", "value")
        hp.setLabel("left", "count")
        hp.getAxis("left").set_integer(True)  # no "1.5 values"
        hp.getViewBox().setMouseEnabled(x=False, y=False)
        hp.getViewBox().enableAutoRange(x=False, y=False)   # both ranges are set by _fit
        self.hist_pre = pg.PlotDataItem(stepMode="center", fillLevel=0,
                                        brush=pg.mkBrush(*PRE_COLOUR, 150), pen=pg.mkPen(PRE_COLOUR))
        self.hist_post = pg.PlotDataItem(stepMode="center", fillLevel=0,
                                         brush=pg.mkBrush(*POST_COLOUR, 220), pen=pg.mkPen(POST_COLOUR))
        hp.addItem(self.hist_pre)
        hp.addItem(self.hist_post)
        self.hist_pre.setZValue(1)
        self.hist_post.setZValue(2)   # under the bound lines (z 4)
        # "↑ 4,096 at bound": a spike taller than the plot says how tall it is.
        self.spike_note = pg.TextItem("", color=(120, 20, 20), fill=(255, 255, 255, 210), anchor=(0, 0))
        self.spike_note.setZValue(3)
        self.spike_note.setVisible(False)
        hp.addItem(self.spike_note, ignoreBounds=True)
        title_never_widens(hp)   # the "sampled" title must not widen a narrow plot
        self._y_top = 1.0
        self.tools = PlotTools(self.widget, "histogram", {hp.getViewBox(): (True, False)},
                               self._text_at, self.rows, self.reset_view)
        # Labels pick their side by the room they have, which a resize or new range changes.
        # The two bound lines: placed from the session's plan, dragged into it.
        self.lines = BoundLines(self, session, path)
        self.lo_line, self.hi_line = self.lines.lo_line, self.lines.hi_line
        hvb = hp.getViewBox()
        hvb.sigRangeChanged.connect(self.lines.place_labels)
        hvb.sigResized.connect(self.lines.place_labels)

    # -- log scale ---------------------------------------------------------------
    def set_log(self, on: bool, tensors: list | None = None, scale: float = 1.0,
                bins: tuple | None = None) -> None:
        """Log counts when ``on``; with ``tensors`` (after, then before if any) also
        bin the values on a signed-log axis of ``scale`` (the next :meth:`draw`),
        or use ``bins`` (``(edges, counts)``: those bins, made in the runner's thread)."""
        self.log_counts = on
        self.log_scale = scale if on and tensors else None
        self._log_tensors = list(tensors) if on and tensors else None
        self._log_given = bins if on and tensors else None

    def fwd(self, v: float) -> float:
        """A real value's x position (the value itself unless on a signed-log axis)."""
        if self.log_scale is None or not math.isfinite(v):
            return v
        return float(signed_log(np.array(v), self.log_scale))

    def inv(self, x: float) -> float:
        """The real value at x position ``x``."""
        if self.log_scale is None or not math.isfinite(x):
            return x
        return float(signed_exp(x, self.log_scale))

    def fit_x(self) -> tuple[float, float]:
        """The unzoomed x range: the values and every finite bound near them (up to
        twice the values' span away), with a margin; set on the view unless the
        user zoomed or is dragging. Returns the range."""
        lo_d, hi_d = self.data_range
        span = max(hi_d - lo_d, 1e-6)
        a, b = lo_d, hi_d
        for v in self.lines.bounds() or ():
            v = self.fwd(v)
            if math.isfinite(v) and lo_d - 2 * span <= v <= hi_d + 2 * span:
                a, b = min(a, v), max(b, v)
        pad = _X_PAD * max(b - a, 1e-6)
        view = (a - pad, b + pad)
        dragging = self.lines.moving()
        if view != self._x_view and not self.tools.is_zoomed and not dragging:
            self._x_view = view
            self.widget.getPlotItem().getViewBox().setXRange(*view, padding=0)
        return view

    def reset_view(self) -> None:
        """Undo a zoom: the fitted x range and count axis again."""
        self._x_view = None
        self.fit_x()
        self.widget.getPlotItem().getViewBox().setYRange(0, self._y_top, padding=0)

    def _text_at(self, _vb: pg.ViewBox, point) -> str | None:
        """The bin under the cursor: its range and how many values it holds."""
        x = self.inv(float(point.x()))
        parts = []
        rng = None
        for name, shown in zip(("before", "after"), self.names):
            if name not in self._series:
                continue
            edges, counts = self._series[name]
            i = int(np.searchsorted(edges, x, side="right")) - 1
            if 0 <= i < counts.size:
                rng = (edges[i], edges[i + 1])
                approx = "≈" if self.sampled > 1 else ""
                parts.append(f"{shown}: {approx}{counts[i]:,.0f}")
        if rng is None:
            return None
        if len(parts) == 1:
            parts = [parts[0].split(": ", 1)[1] + " values"]
        return f"[{rng[0]:.4g}, {rng[1]:.4g})  " + " · ".join(parts)

    def rows(self) -> tuple[list[str], list[list]]:
        """The histograms as CSV rows: series, bin edges, count (scaled if sampled)."""
        out = []
        for name, shown in zip(("before", "after"), self.names):
            if name in self._series:
                edges, counts = self._series[name]
                out += [[shown, float(edges[i]), float(edges[i + 1]), float(counts[i])]
                        for i in range(counts.size)]
        return ["series", "bin_low", "bin_high", "count"], out

    # -- drawing ---------------------------------------------------------------
    def draw(self, record: CaptureRecord, prepared: RecordDisplay | None = None) -> None:
        """Show ``record``'s histograms (before and after) and fit the count axis;
        ``prepared``: its numbers made in the runner's thread (else made here)."""
        # light: before the layer's own intervention, or the run without any (core's reference_of)
        stats, pre = record.stats, reference_of(record)[1]
        self.names = version_names(record) if record.pair is not None else ("before", "after")
        ranges: list[tuple[float, float]] = []
        peaks: dict[pg.PlotDataItem, tuple[float, float]] = {}
        self._series = {}
        scales = []
        log_bins = self._log_bins()
        for item, s in ((self.hist_post, stats), (self.hist_pre, pre)):
            if log_bins is not None and s is not None and item in log_bins:
                # Values on the signed-log axis: both histograms in the same log bins.
                drawn_edges, counts = log_bins[item]
                edges = signed_exp(drawn_edges, self.log_scale or 1.0)
                self._show_series(item, edges, counts, drawn_edges, ranges, peaks)
                continue
            if s is None or s.count == 0 or len(s.hist_edges) != len(s.hist_counts) + 1:
                item.setData([0.0, 1.0], [0.0])
                item.setVisible(False)
                continue
            edges = np.asarray(s.hist_edges, dtype=float)
            counts = np.asarray(s.hist_counts, dtype=float)
            common = None
            if item is self.hist_post:
                # Before and after in the same bins, so the two are comparable and the
                # values a clamp piled up at its bounds show as spikes there. The core
                # already bins a clamp's output this way; this is for other interventions.
                common = prepared.common_counts if prepared is not None else \
                    common_bins(s, pre, record.tensor)
            if common is not None and pre is not None:
                edges = np.asarray(pre.hist_edges, dtype=float)
                counts = common
            else:
                # A large tensor's counts are of a sample: scaled up to the
                # full count (min/max/mean/std are exact), and the title says so.
                factor = sample_scale(s)
                if factor > 1:
                    counts = counts * factor
                    scales.append((factor, int(np.asarray(s.hist_counts).sum())))
            self._show_series(item, edges, counts, edges, ranges, peaks)
        if ranges:
            self.data_range = (min(r[0] for r in ranges), max(r[1] for r in ranges))
        self.sampled = max((f for f, _n in scales), default=1.0)
        title = None
        if scales:
            n = min(n for _f, n in scales)
            title = f"≈ counts, scaled up from a sample of {n:,} values"
        if title != getattr(self, "_title", None):
            self._title = title
            self.widget.getPlotItem().setTitle(title, size="8pt", color="#666")
        self._fit(peaks.get(self.hist_pre), peaks.get(self.hist_post),
                  at_bound=record.intervention is not None and self.lines.bounds() is not None)
        self._label_log_axes(peaks)
        self.lines.place()

    def _log_bins(self) -> dict | None:
        """Each histogram item's (drawn edges, counts) on the signed-log axis, or
        ``None`` when the values are drawn on a linear axis."""
        if self._log_tensors is None or self.log_scale is None:
            return None
        edges, counts = self._log_given or log_histogram(self._log_tensors, self.log_scale)
        items = (self.hist_post, self.hist_pre)[: len(counts)]
        return {item: (edges, c) for item, c in zip(items, counts)}

    def _show_series(self, item: pg.PlotDataItem, edges: np.ndarray, counts: np.ndarray,
                     drawn_edges: np.ndarray, ranges: list, peaks: dict) -> None:
        """Draw one histogram: real ``edges`` and ``counts`` for the readouts,
        ``drawn_edges`` (and log counts when on) for the picture."""
        self._series["after" if item is self.hist_post else "before"] = (edges, counts)
        drawn = log_counts(counts) if self.log_counts else counts
        item.setData(drawn_edges, drawn)
        item.setVisible(True)
        ranges.append((float(drawn_edges[0]), float(drawn_edges[-1])))
        if counts.size:
            i = int(np.argmax(drawn))
            peaks[item] = (float(drawn[i]), 0.5 * float(drawn_edges[i] + drawn_edges[i + 1]))

    def _label_log_axes(self, peaks: dict[pg.PlotDataItem, tuple[float, float]]) -> None:
        """Real counts on a log count axis, real values on a signed-log value axis."""
        hp = self.widget.getPlotItem()
        left, bottom = hp.getAxis("left"), hp.getAxis("bottom")
        set_ticks(left, [count_ticks(10.0 ** self._y_top)] if self.log_counts else None)
        if self.log_scale is not None:
            lo, hi = self.inv(self.data_range[0]), self.inv(self.data_range[1])
            # About one label per 45 px each side of zero: no crowding in a narrow plot.
            per_side = max(2, int(self.widget.width() / 90))
            set_ticks(bottom, [log_ticks(lo, hi, self.log_scale, per_side)])
        else:
            set_ticks(bottom, None)
        set_label(hp, "left", "count (log)" if self.log_counts else "count")
        set_label(hp, "bottom", "value (signed log)" if self.log_scale is not None else "value")

    def _fit(self, pre_peak: tuple[float, float] | None,
             post_peak: tuple[float, float] | None, at_bound: bool) -> None:
        """The count axis: room for the "before" shape and for the spike a clamp
        piles up at a bound, up to :data:`_SPIKE_CAP` times the "before" peak; a
        taller spike is cut there and labelled with its count."""
        vb = self.widget.getPlotItem().getViewBox()
        note = None
        if self.log_counts:
            # Log counts: half a decade of headroom over the highest bin, no cut spike.
            top = max(pre_peak[0] if pre_peak else 0.0, post_peak[0] if post_peak else 0.0) + 0.5
        elif pre_peak is not None:
            base = max(pre_peak[0], 1.0)
            top = max(_PRE_HEADROOM * base, 1.1 * (post_peak[0] if post_peak else 0.0))
            if top > _SPIKE_CAP * base:
                top = _SPIKE_CAP * base
                note = post_peak
        else:
            top = _HEADROOM * max(post_peak[0] if post_peak else 1.0, 1.0)
        self._y_top = top
        if not self.tools.is_zoomed:
            vb.setYRange(0, top, padding=0)
        if self.spike_note.isVisible() != (note is not None):
            self.spike_note.setVisible(note is not None)
        if note is not None:
            count, x = note
            # On top of the cut spike, kept inside the plot near its edges.
            lo_d, hi_d = self.data_range
            f = (x - lo_d) / (hi_d - lo_d) if hi_d > lo_d else 0.5
            placed = (f"↑ {count:,.0f} {'at bound' if at_bound else 'in one bin'}",
                      (min(max(f, 0.0), 1.0), 0), x, top)
            if placed != self._note_placed:  # a Live drag re-sends the same spike often
                self._note_placed = placed
                self.spike_note.setText(placed[0])
                self.spike_note.setAnchor(placed[1])
                self.spike_note.setPos(x, top)
