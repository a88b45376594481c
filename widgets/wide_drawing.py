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
configures the axes. The numbers come from core (``wide_views``,
``map_window``); nothing here computes a norm.
"""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
import torch
from PySide6.QtCore import QRectF

from hookscope.core.views import (Window, as_float_array, bars_values, full_size, log_ticks,
                                  picture, pool_window, reduce_2d, row_norms, side_by_side,
                                  signed_log, symmetric_level, top_k_picture, top_units, unit_norms,
                                  view_image, visible_window)

from .plot_readouts import DrawnImage, bar_cell
from .histogram_view import POST_COLOUR, PRE_COLOUR
from .plot_style import peak_envelope, set_ticks

COLOUR_MAP = "CET-D1"           # diverging blue-white-red: zero is white

_MIN_IMAGE_PIXELS = 128   # a view not laid out yet still gets a readable picture


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
    def _pixels(self, halves: bool) -> tuple[int, int]:
        ratio = self.view_widget.devicePixelRatioF()
        rows = max(_MIN_IMAGE_PIXELS, int(self.view_widget.height() * ratio))
        cols = max(_MIN_IMAGE_PIXELS, int(self.view_widget.width() * ratio))
        return rows, (max(_MIN_IMAGE_PIXELS, cols // 2) if halves else cols)

    def _map_pictures(self, tensor: torch.Tensor, pre: torch.Tensor | None, kind: str,
                      view: str) -> tuple[torch.Tensor, torch.Tensor | None, str]:
        """The full-resolution 2-D maps (after, before) of ``view`` and the
        readout kind; top-k picks its units from both."""
        if view == "top_k":
            units = top_units(tensor, kind, also=pre)
            self.top_units = units
            return (top_k_picture(tensor, kind, units),
                    top_k_picture(pre, kind, units) if pre is not None else None, "top_k")
        if view == "row_norm":   # feature maps: the norm over channels at each position
            h, w = tensor.shape[2], tensor.shape[3]
            return (torch.from_numpy(row_norms(tensor, kind)).reshape(h, w),
                    torch.from_numpy(row_norms(pre, kind)).reshape(h, w) if pre is not None else None,
                    "position_norm")
        if kind == "tokens":
            return picture(tensor, kind), picture(pre, kind) if pre is not None else None, "tokens"
        return _heat_map(tensor), _heat_map(pre) if pre is not None else None, "heatmap"

    def draw_map(self, tensor: torch.Tensor, pre: torch.Tensor | None, kind: str,
                  view: str) -> tuple[tuple[int, int], tuple | None]:
        """Draw a 2-D map (heat map, token map, top-k, position norms): all of it,
        or the part in view when zoomed; returns its size in activation units and
        the before | after halves' geometry (see ``LayerPlot._configure_view``)."""
        post_m, pre_m, read_kind = self._map_pictures(tensor, pre, kind, view)
        self.map_source = (post_m, pre_m, read_kind, tuple(tensor.shape))
        self._window = None
        return self._draw_whole_map()

    def _draw_whole_map(self) -> tuple[tuple[int, int], tuple | None]:
        assert self.map_source is not None
        post_m, pre_m, read_kind, shape = self.map_source
        rows, cols = self._pixels(pre_m is not None)
        post = _pool(post_m, rows, cols)
        pre = _pool(pre_m, rows, cols) if pre_m is not None else None
        level = symmetric_level(post, pre)
        self._level = level
        gap = 0 if pre is None else max(2, pre.shape[1] // 16)
        img = post if pre is None else side_by_side(pre, post, gap=gap)
        sy, sx = post_m.shape[0] / post.shape[0], post_m.shape[1] / post.shape[1]
        self._set_image(img, level, QRectF(0, 0, img.shape[1] * sx, img.shape[0] * sy))
        self.drawn = DrawnImage(img, (sy, sx), pre.shape[1] if pre is not None else 0,
                                 gap if pre is not None else 0, shape, read_kind,
                                 row_labels=self._row_labels(shape, read_kind),
                                 col_units=self._col_units(read_kind))
        halves = None
        if pre is not None:
            n = pre.shape[1] * sx
            halves = (round(n, 6), round((pre.shape[1] + gap) * sx, 6), round(img.shape[1] * sx, 6),
                      round((pre.shape[1] + gap / 2) * sx, 6))
        self._full_layout = ((round(img.shape[0] * sy), round(img.shape[1] * sx)), halves)
        return self._full_layout

    def _draw_window(self, w: Window) -> None:
        """Pool only the rows and columns ``w`` of the map, at the view's resolution."""
        assert self.map_source is not None and self._full_layout is not None
        post_m, pre_m, read_kind, shape = self.map_source
        _size, halves = self._full_layout
        level = self._level
        labels, units = self._row_labels(shape, read_kind), self._col_units(read_kind)
        if w.side == "both" and pre_m is not None and halves is not None:
            rows, cols = self._pixels(True)
            pre = pool_window(pre_m, w, rows, cols)
            post = pool_window(post_m, w, rows, cols)
            gap = max(2, pre.shape[1] // 16)
            img = side_by_side(pre, post, gap=gap)
            sy, sx = (w.r1 - w.r0) / post.shape[0], post_m.shape[1] / post.shape[1]
            self._set_image(img, level, QRectF(0, w.r0, img.shape[1] * sx, img.shape[0] * sy))
            self.drawn = DrawnImage(img, (sy, sx), pre.shape[1], gap, shape, read_kind,
                                     origin=(w.r0, 0.0), index0=(w.r0, 0),
                                     row_labels=labels, col_units=units)
            return
        rows, cols = self._pixels(False)
        source = pre_m if w.side == "before" and pre_m is not None else post_m
        img = pool_window(source, w, rows, cols)
        x_off = halves[1] if w.side == "after" and halves is not None else 0.0
        sy, sx = (w.r1 - w.r0) / img.shape[0], (w.c1 - w.c0) / img.shape[1]
        self._set_image(img, level, QRectF(x_off + w.c0, w.r0, w.c1 - w.c0, w.r1 - w.r0))
        self.drawn = DrawnImage(img, (sy, sx), 0, 0, shape, read_kind,
                                 origin=(w.r0, x_off + w.c0), index0=(w.r0, w.c0),
                                 side=f"{w.side} · " if w.side in ("before", "after") else "",
                                 row_labels=labels, col_units=units)

    def repool(self) -> None:
        """The view range moved (zoom, pan): draw the part in view at full resolution."""
        if self.map_source is None or self._full_layout is None or not self.image.isVisible():
            return
        post_m = self.map_source[0]
        _size, halves = self._full_layout
        (x0, x1), (y0, y1) = self.view_widget.getPlotItem().getViewBox().viewRange()
        w = visible_window((x0, x1), (y0, y1), post_m.shape[0], post_m.shape[1],
                           None if halves is None else (halves[0], halves[1]))
        if w == self._window:
            return
        self._window = w
        if w is None:
            self._draw_whole_map()
        else:
            self._draw_window(w)

    def _set_image(self, img: np.ndarray, level: float, rect: QRectF) -> None:
        """Show ``img`` (real values) on the linear or signed-log colour scale."""
        img = np.clip(img, -level, level)  # ±Inf drawn as the extreme colour; NaN stays blank
        top = level
        if self.log_map:
            scale = self._log_scale_of_map
            img = signed_log(img, scale).astype(np.float32)
            top = float(signed_log(np.array(level), scale))
        # pyqtgraph images are indexed [x, y]: transpose rows × columns.
        self.image.setImage(img.T, levels=(-top, top), autoLevels=False)
        bar_key = (top, self.log_map)
        if bar_key != self._bar_level:  # its axis is laid out again: only on a change
            self._bar_level = bar_key   # type: ignore[assignment]
            self.colour_bar.setLevels((-top, top))
            self.colour_bar.axis.setTicks([log_ticks(-level, level, self._log_scale_of_map, 3)]
                                          if self.log_map else None)
        self.image.setRect(rect)
        self.drawn_size = (self.view_widget.width(), self.view_widget.height())

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
    def draw_unit_norms(self, tensor: torch.Tensor, pre: torch.Tensor | None,
                         kind: str) -> tuple[int, float, float]:
        """One bar per unit (channel): its L2 norm over the rows, before and after."""
        post_v = unit_norms(tensor, kind)
        pre_v = unit_norms(pre, kind) if pre is not None else None
        drawn = self._norm_axis(post_v, pre_v)
        self.norm_post.setData(*peak_envelope(drawn(post_v)))
        if pre_v is not None:
            self.norm_pre.setData(*peak_envelope(drawn(pre_v)))
        self._unit_norms = (post_v, pre_v)
        hi = max(float(np.max(drawn(v))) if v.size else 0.0 for v in (post_v, pre_v) if v is not None)
        return post_v.size, 0.0, hi

    def draw_row_norms(self, tensor: torch.Tensor, pre: torch.Tensor | None, kind: str) -> int:
        """One horizontal bar per row (token): its vector's L2 norm, before and after."""
        post_v = row_norms(tensor, kind)
        pre_v = row_norms(pre, kind) if pre is not None else None
        drawn = self._norm_axis(post_v, pre_v)
        y = np.arange(post_v.size, dtype=float)
        self.hbars_post.setOpts(x0=0.0, y=y, width=drawn(post_v), height=0.5 if pre is not None else 0.8)
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
        names = ("with", "without") if ref_label == "without" else ("after", "before")
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

    def draw_bars(self, tensor, pre_tensor) -> tuple[tuple[int, ...], tuple[int, float, float]]:
        """Feed the bars; returns the shape and ``(units, low, high)`` of what they show."""
        post = bars_values(tensor)
        x = np.arange(post.size, dtype=float)
        self.bars_post.setOpts(x=x, height=post, width=0.5 if pre_tensor is not None else 0.8)
        shown = [post]
        if pre_tensor is not None:
            pre = bars_values(pre_tensor)
            self.bars_pre.setOpts(x=x, height=pre, width=0.8)
            shown.append(pre)
        self.bars = (post, shown[1] if pre_tensor is not None else None)
        lo, hi = 0.0, 0.0  # bars grow from zero
        for v in shown:
            v = v[np.isfinite(v)]
            if v.size:
                lo, hi = min(lo, float(v.min())), max(hi, float(v.max()))
        return post.shape, (post.size, lo, hi)

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

    def draw_image(self, tensor, pre_tensor, kind: str) -> tuple[tuple[int, ...], tuple | None]:
        """Feed the image; returns its size in activation units and, for before |
        after, the halves' geometry (see ``LayerPlot._configure_view``)."""
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
        # Axes count the activation's rows and columns, not the pooled pixels.
        full = full_size(tuple(tensor.shape), kind)
        sy, sx = (1.0, 1.0) if full is None else (full[0] / post.shape[0], full[1] / post.shape[1])
        self._set_image(img, level, QRectF(0, 0, img.shape[1] * sx, img.shape[0] * sy))
        self.drawn = DrawnImage(img, (sy, sx), pre.shape[1] if pre is not None else 0,
                                 gap if pre is not None else 0, tuple(tensor.shape), kind)
        halves = None
        if pre is not None:
            n = pre.shape[1] * sx
            halves = (round(n, 6), round((pre.shape[1] + gap) * sx, 6), round(img.shape[1] * sx, 6),
                      round((pre.shape[1] + gap / 2) * sx, 6))
        return (round(img.shape[0] * sy), round(img.shape[1] * sx)), halves


def _heat_map(t: torch.Tensor) -> torch.Tensor:
    """A heatmap view's full-resolution 2-D map (a long vector folded near-square)."""
    x = as_float_array(t)
    if x.dim() <= 1 or (x.dim() == 2 and x.shape[0] == 1):
        shape = full_size(tuple(t.shape), "heatmap")
        assert shape is not None
        v = x.reshape(-1)
        if v.numel() == shape[0] * shape[1]:   # fills the square: no padded copy
            return v.reshape(shape)
        out = torch.full((shape[0] * shape[1],), float("nan"))
        out[: v.numel()] = v
        return out.reshape(shape)
    if x.dim() > 2:
        return x[0].reshape(-1, x.shape[-1])
    return x


def _pool(x: torch.Tensor, rows: int, cols: int) -> np.ndarray:
    return reduce_2d(x, rows, cols)
