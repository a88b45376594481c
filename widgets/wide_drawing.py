"""How a layer panel draws its shape view, in the view its chooser picked:
the heat map (re-pooled at full resolution for the part a zoom shows, on a
linear or signed-log colour scale), per-row norms as bars and per-unit norms
as a peak envelope, the top-k units as a map with their indices on the axis,
and the small-vector bars and feature-map grid of before.

:class:`WideDrawing` is one panel's shape view: it creates the view's
pyqtgraph items once (image, colour bar, bars, norm curves) on the panel's
plot, moves data into them, and keeps what it drew (the pooled picture, the
norms, the top units) for the readouts. The panel
(:class:`~hookscope.widgets.layer_plot.LayerPlot`) decides what to draw and
configures the axes. Nothing here computes a picture: the numbers come ready
(core's :class:`~hookscope.core.views.ShapeDisplay`, made by the runner's thread
or the panel's view worker), and the part of a map a zoom shows is pooled by
core's ``window_picture`` in the :class:`~.view_worker.ViewWorker` (inline
only for a panel without one: a widget on its own).
"""

from __future__ import annotations

from functools import partial

import numpy as np
import pyqtgraph as pg
import torch
from PySide6.QtCore import QRectF

from hookscope.core.views import (Picture, ShapeDisplay, Window, log_ticks, signed_log,
                                  visible_window, window_picture)

from .plot_readouts import DrawnImage, bar_cell
from .histogram_view import POST_COLOUR, PRE_COLOUR
from .plot_style import peak_envelope, set_ticks
from .view_worker import ViewWorker

COLOUR_MAP = "CET-D1"           # diverging blue-white-red: zero is white


class WideDrawing:
    """The pictures of one panel's shape view (``view_widget``), made once and fed data."""

    def __init__(self, view_widget: pg.PlotWidget) -> None:
        self.view_widget = view_widget
        vp = view_widget.getPlotItem()
        self.image = pg.ImageItem()
        self.image.setColorMap(pg.colormap.get(COLOUR_MAP))
        self.bars_pre = pg.BarGraphItem(x=[0], height=[0], width=0.8,
                                        brush=pg.mkBrush(*PRE_COLOUR, 160), pen=pg.mkPen(None))
        self.bars_post = pg.BarGraphItem(x=[0], height=[0], width=0.5,
                                         brush=pg.mkBrush(*POST_COLOUR), pen=pg.mkPen(None))
        # Per-row (token) norms: horizontal bars, one row per token as in the map.
        self.hbars_pre = pg.BarGraphItem(x0=[0], y=[0], width=[0], height=0.8,
                                         brush=pg.mkBrush(*PRE_COLOUR, 160), pen=pg.mkPen(None))
        self.hbars_post = pg.BarGraphItem(x0=[0], y=[0], width=[0], height=0.5,
                                          brush=pg.mkBrush(*POST_COLOUR), pen=pg.mkPen(None))
        # Per-unit norms of thousands of units: a peak envelope, so one outlier unit
        # narrower than a pixel still shows as a spike (bars that thin vanish).
        self.norm_pre = pg.PlotDataItem(fillLevel=0, brush=pg.mkBrush(*PRE_COLOUR, 150),
                                        pen=pg.mkPen(PRE_COLOUR))
        self.norm_post = pg.PlotDataItem(pen=pg.mkPen(POST_COLOUR, width=1))
        for item in (self.image, self.bars_pre, self.bars_post, self.hbars_pre, self.hbars_post,
                     self.norm_pre, self.norm_post):
            vp.addItem(item)
            item.setVisible(False)
        # The colour scale of images: symmetric, white at zero. Shown only beside
        # images (the panel puts it in the plot's layout); it only displays the levels.
        self.colour_bar = pg.ColorBarItem(values=(-1.0, 1.0), colorMap=pg.colormap.get(COLOUR_MAP),
                                          interactive=False, width=10, colorMapMenu=False)
        self.colour_bar.axis.enableAutoSIPrefix(False)
        self.colour_bar.axis.setSIPrefixEnableRanges(())
        self.colour_bar.hide()
        self._bar_level: tuple | None = None   # (top, log) the colour bar shows
        self.token_labels: list[str] | None = None  # token strings for a tokens view's rows
        self.drawn: DrawnImage | None = None    # the picture shown, for the readouts
        self.drawn_size = (0, 0)                # the view's size when its image was pooled
        self.bars: tuple[np.ndarray, np.ndarray | None] | None = None   # (after, before) drawn
        self._bars_fit: tuple | None = None     # (units, low, high) the bar view was fitted to
        self._hbars_fit: tuple | None = None
        self._hbars_hi = 1.0
        self._full_layout: tuple | None = None   # (size, halves) of the whole map as last drawn
        self._whole: Picture | None = None       # the whole picture as last drawn (a zoom undone)
        self.shape: ShapeDisplay | None = None   # the numbers drawn
        #: where a zoom's part of the map is pooled (``None``: here, a widget on its own)
        self.worker: ViewWorker | None = None
        self._window: Window | None = None       # the part of the map drawn (None: all of it)
        self.map_source: tuple | None = None     # (after 2-D, before 2-D or None, kind, shape)
        self._norms: tuple[np.ndarray, np.ndarray | None] | None = None   # row norms drawn
        self._unit_norms: tuple[np.ndarray, np.ndarray | None] | None = None   # unit norms drawn
        self._norm_ticks: list | None = None
        self.top_units: np.ndarray | None = None   # the top-k view's units, largest first
        self.log_map = False
        self._log_scale_of_map = 1.0
        self._level = 1.0

    def forget_fits(self) -> None:
        """The next bars and norms are fitted to the view afresh (a zoom was undone)."""
        self._bars_fit = None
        self._hbars_fit = None

    # -- pictures --------------------------------------------------------------------
    def pixel_size(self) -> tuple[int, int]:
        """The plot's size in device pixels (height, width): what pictures are pooled to."""
        ratio = self.view_widget.devicePixelRatioF()
        return int(self.view_widget.height() * ratio), int(self.view_widget.width() * ratio)

    def log_scale(self) -> float | None:
        """The maps' signed-log knee, ``None`` on the linear scale."""
        return self._log_scale_of_map if self.log_map else None

    def show(self, d: ShapeDisplay) -> tuple[tuple | None, tuple | None, tuple | None, str]:
        """Move ``d``'s numbers into the pictures; returns the size of what is drawn (in
        activation units), the bars' ``(units, low, high)``, the before | after halves'
        geometry (see ``LayerPlot._configure_view``) and the kind of picture drawn."""
        self.shape = d
        self.map_source = None
        self._window = None
        if d.bars is not None:
            self._show_bars(*d.bars)
            return (d.bars[0].size,), d.extent, None, "bars"
        if d.norms is not None and d.shown == "unit_norm":
            extent = self._show_unit_norms(*d.norms)
            return (extent[0],), extent, None, "unit_norm"
        if d.norms is not None:
            return (self._show_row_norms(*d.norms),), None, None, "row_norm"
        assert d.picture is not None and d.picture.layout is not None
        if d.maps is not None:
            if d.units is not None:
                self.top_units = d.units
            self.map_source = (d.maps[0], d.maps[1], d.read_kind, d.shape)
        self._level = d.picture.level
        self._whole = d.picture
        self._full_layout = d.picture.layout
        self._show_picture(d.picture, d.shape, d.read_kind or d.kind, d)
        size, halves = d.picture.layout
        return size, None, halves, d.shown

    def _show_picture(self, p: Picture, shape: tuple[int, ...], read_kind: str,
                      made_for: ShapeDisplay | None = None) -> None:
        """Show ``p`` (its colours are made already) and keep it for the readouts."""
        # pyqtgraph images are indexed [x, y]: transpose rows × columns.
        self.image.setImage(p.coloured.T, levels=(-p.top, p.top), autoLevels=False)
        bar_key = (p.top, p.log_scale is not None)
        if bar_key != self._bar_level:  # its axis is laid out again: only on a change
            self._bar_level = bar_key   # type: ignore[assignment]
            self.colour_bar.setLevels((-p.top, p.top))
            self.colour_bar.axis.setTicks([log_ticks(-p.level, p.level, p.log_scale, 3)]
                                          if p.log_scale is not None else None)
        self.image.setRect(QRectF(*p.rect))
        if made_for is not None:   # the size it was pooled for, in the widget's pixels
            ratio = self.view_widget.devicePixelRatioF()
            self.drawn_size = (made_for.width_px / ratio, made_for.height_px / ratio)
        self.drawn = DrawnImage(p.image, p.scale, p.pre_cols, p.gap, shape, read_kind,
                                origin=p.origin, index0=p.index0, side=p.side,
                                row_labels=self._row_labels(shape, read_kind),
                                col_units=self._col_units(read_kind))

    def repool(self) -> None:
        """The view range moved (zoom, pan): draw the part in view at full resolution
        (made by the view worker where there is one; the picture stays till then)."""
        if self.map_source is None or self._full_layout is None or not self.image.isVisible():
            return
        source = self.map_source
        post_m, pre_m, read_kind, shape = source
        _size, halves = self._full_layout
        (x0, x1), (y0, y1) = self.view_widget.getPlotItem().getViewBox().viewRange()
        w = visible_window((x0, x1), (y0, y1), post_m.shape[0], post_m.shape[1],
                           None if halves is None else (halves[0], halves[1]))
        if w == self._window:
            return
        self._window = w
        if w is None:
            if self.worker is not None:
                self.worker.forget(self.view_widget)   # a window still on its way is stale
            assert self._whole is not None
            self._show_picture(self._whole, shape, read_kind)
            return
        job = partial(window_picture, post_m, pre_m, w, halves, self._level, *self.pixel_size(),
                      self.log_scale())

        def arrived(p: Picture) -> None:
            if self.map_source is source and self._window == w:   # not moved on since
                self._show_picture(p, shape, read_kind)

        if self.worker is None:
            arrived(job())
        else:
            self.worker.submit(self.view_widget, job, arrived)

    def set_map_log(self, on: bool, scale: float = 1.0) -> None:
        """Draw maps on a signed-log colour scale, its knee at ``scale`` (the
        typical |value|, core's ``typical_magnitude``)."""
        self.log_map = on
        self._log_scale_of_map = scale if on else 1.0

    def _row_labels(self, shape: tuple[int, ...], read_kind: str) -> list[str] | None:
        labels = self.token_labels
        if labels and len(shape) == 3 and read_kind in ("tokens", "top_k") and shape[1] == len(labels):
            return labels
        return None

    def _col_units(self, read_kind: str) -> list[int] | None:
        return [int(u) for u in self.top_units] if read_kind == "top_k" and self.top_units is not None \
            else None

    # -- norms -------------------------------------------------------------------------
    def _show_unit_norms(self, post_v: np.ndarray,
                         pre_v: np.ndarray | None) -> tuple[int, float, float]:
        """One bar per unit (channel): its L2 norm over the rows, before and after."""
        drawn = self._norm_axis(post_v, pre_v)
        self.norm_post.setData(*peak_envelope(drawn(post_v)))
        if pre_v is not None:
            self.norm_pre.setData(*peak_envelope(drawn(pre_v)))
        self._unit_norms = (post_v, pre_v)
        hi = max(float(np.max(drawn(v))) if v.size else 0.0 for v in (post_v, pre_v) if v is not None)
        return post_v.size, 0.0, hi

    def _show_row_norms(self, post_v: np.ndarray, pre_v: np.ndarray | None) -> int:
        """One horizontal bar per row (token): its vector's L2 norm, before and after."""
        drawn = self._norm_axis(post_v, pre_v)
        y = np.arange(post_v.size, dtype=float)
        self.hbars_post.setOpts(x0=0.0, y=y, width=drawn(post_v),
                                height=0.5 if pre_v is not None else 0.8)
        if pre_v is not None:
            self.hbars_pre.setOpts(x0=0.0, y=y, width=drawn(pre_v), height=0.8)
        self._norms = (post_v, pre_v)
        self._hbars_hi = max(float(np.max(drawn(v))) if v.size else 0.0
                             for v in (post_v, pre_v) if v is not None)
        return post_v.size

    def _norm_axis(self, post: np.ndarray, pre: np.ndarray | None):
        """How norms are drawn: as they are, or on the log scale when it is on
        (norms of a heavy-tailed layer span decades too); the value axis then
        gets real-valued ticks (``_norm_ticks``). Returns the transform."""
        self._norm_ticks = None
        if not self.log_map:
            return lambda v: v
        both = post if pre is None else np.concatenate([post, pre])
        positive = both[both > 0]
        # The knee below the smallest norm: every bar sits on the log part of the axis.
        scale = float(positive.min()) / 2 if positive.size else 1.0
        top = float(both.max()) if both.size else 1.0
        self._norm_ticks = log_ticks(0.0, top, scale, 4)
        return lambda v: signed_log(v, scale)

    def norm_text(self, x: float, y: float, what: str, horizontal: bool,
                  ref_label: str) -> str | None:
        """The norm bar under the cursor; ``ref_label`` names the light series."""
        names = {"without": ("with", "without"), "A": ("B", "A")}.get(ref_label, ("after", "before"))
        if horizontal:
            if self._norms is None:
                return None
            labels = self.token_labels if self.token_labels and \
                len(self.token_labels) == self._norms[0].size else None
            return bar_cell(y, *self._norms, labels=[repr(s) for s in labels] if labels else None,
                            names=names, what=f"norm of {what}")
        norms = self._unit_norms
        return None if norms is None else bar_cell(x, *norms, names=names, what=f"norm of {what}")

    # -- labels, bars and the feature-map grid ------------------------------------------
    def apply_token_labels(self, tensor: torch.Tensor | None, view_kind: str, shown_view: str) -> None:
        """The token strings on a tokens view's token axis (real norms on a log norm axis)."""
        axis = self.view_widget.getPlotItem().getAxis("left")
        t = tensor
        labels = self.token_labels
        if (labels and view_kind == "tokens" and t is not None and t.dim() == 3
                and t.shape[1] == len(labels) and shown_view != "unit_norm"):
            # About one label per 14 px of height (they stay readable), and every one of
            # a short prompt's up to 20 tokens.
            room = max(20, int(self.view_widget.height() - 50) // 14)
            step = max(1, -(-len(labels) // room))
            mid = 0.0 if shown_view == "row_norm" else 0.5   # bars sit on whole rows
            set_ticks(axis, [[(i + mid, labels[i]) for i in range(0, len(labels), step)]])
        elif shown_view == "unit_norm" and self._norm_ticks:
            set_ticks(axis, [self._norm_ticks])   # log-scaled norms, labelled with real norms
        else:
            set_ticks(axis, None)

    def apply_unit_labels(self, halves: tuple | None, shown_view: str) -> None:
        """The top-k view's columns are named by their unit index (both halves)."""
        axis = self.view_widget.getPlotItem().getAxis("bottom")
        units = self.top_units if shown_view == "top_k" and self.map_source is not None else None
        if units is None:
            set_ticks(axis, [self._norm_ticks] if shown_view == "row_norm" and self._norm_ticks
                      else None)
            return
        k = len(units)
        width = max(self.view_widget.width() - 60, 100) / (2 if halves else 1)
        digits = len(str(int(max(units)))) if k else 1
        step = max(1, -(-k * (8 * digits + 14) // int(width)))
        ticks = [(c + 0.5, str(int(units[c]))) for c in range(0, k, step)]
        if halves:
            n, offset = halves[0], halves[1]
            ticks += [(offset + (c + 0.5) * n / k, str(int(units[c]))) for c in range(0, k, step)]
        set_ticks(axis, [ticks])

    def _show_bars(self, post: np.ndarray, pre: np.ndarray | None) -> None:
        """Feed the bars (after, and before where there is one)."""
        x = np.arange(post.size, dtype=float)
        self.bars_post.setOpts(x=x, height=post, width=0.5 if pre is not None else 0.8)
        if pre is not None:
            self.bars_pre.setOpts(x=x, height=pre, width=0.8)
        self.bars = (post, pre)

    def fit_bars(self, units: int, lo: float, hi: float) -> None:
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

    def fit_hbars(self) -> None:
        """Keep every token's norm bar in view; refit only when they no longer fit
        or fill less than a quarter of it (a Live drag keeps the view still)."""
        if self._norms is None:
            return
        n = self._norms[0].size
        hi = self._hbars_hi if self._hbars_hi > 0 else 1.0
        vb = self.view_widget.getPlotItem().getViewBox()
        fit = (n, hi)
        if fit == self._hbars_fit:
            return
        (_x0, x1), _ = vb.viewRange()
        same_rows = self._hbars_fit is not None and self._hbars_fit[0] == n
        self._hbars_fit = fit
        if same_rows and hi <= x1 and hi >= 0.25 * x1:
            return
        vb.enableAutoRange(x=False, y=False)
        if same_rows:
            vb.setXRange(0, 1.06 * hi, padding=0)
        else:
            vb.setRange(xRange=(0, 1.06 * hi), yRange=(-0.6, n - 0.4), padding=0)
