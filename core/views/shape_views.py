"""A layer panel's shape view made ready to draw: the heat map, token map,
top-k map or position norms pooled to the panel's size in pixels (and the
full-resolution map kept for a zoom), the feature-map grid, the row or unit
norms, the small vector's bars. Pure torch + numpy, no Qt.

A front end says what each panel shows (:class:`ShapeWanted`: the view
picked, the log scale picked, the plot's size in device pixels) in a
:class:`ShapeViews` it puts on the run request; the runner's thread then
makes each record's :class:`ShapeDisplay` (:func:`prepare_shape`, called by
``display.prepare_display``). A panel whose view, size or scale changed since
makes the same numbers with :func:`shape_display` off the GUI thread, and a
zoom's part of the map with :func:`window_picture`. Either way the panel only
moves the numbers into its pictures.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

import numpy as np
import torch

from .map_window import Window, pool_window
from .views_by_shape import (as_float_array, bars_values, full_size, reduce_2d, side_by_side,
                             symmetric_level, view_image, view_kind)
from .wide_views import (ValueSpread, picture, row_norms, signed_log, top_k_picture, top_units, unit_norms,
                         wants_log, wide_views)

#: A view not laid out yet (or tiny) still gets a readable picture.
MIN_IMAGE_PIXELS = 128
#: A picture pooled for a plot within this factor of the plot's size is drawn as it is.
SIZE_TOLERANCE = 1.25


@dataclass(frozen=True)
class ShapeWanted:
    """What one panel shows: ``view`` as picked (``None``: the default; a view the
    shape does not offer falls back to ``map``, as the chooser does), ``log`` as
    picked (``None``: automatic, by the values' spread), the plot's size in device
    pixels, and the tensor leaf it draws (``""``: the first)."""

    view: str | None = None
    log: bool | None = None
    height_px: int = 0
    width_px: int = 0
    leaf: str = ""


@dataclass(frozen=True)
class ShapeViews:
    """What a front end's panels show, for the runner to prepare: per ``(path, call)``,
    else per path (a layer's stored choice, before its panel exists), else ``default``."""

    by_call: Mapping[tuple[str, int], ShapeWanted] = field(default_factory=dict)
    by_path: Mapping[str, ShapeWanted] = field(default_factory=dict)
    default: ShapeWanted | None = None

    def wanted(self, path: str, call: int) -> ShapeWanted | None:
        got = self.by_call.get((path, call))
        if got is None:
            got = self.by_path.get(path, self.default)
        return got


@dataclass(frozen=True)
class Picture:
    """An image as drawn: ``image`` (rows × columns of real values, NaN blank; before
    | after side by side, ``pre_cols`` pixels and a ``gap``), activation units per
    pixel ``scale`` (rows, columns), the ± colour ``level``, where it sits (``rect``:
    x, y, width, height in activation units), its first pixel's place (``origin``,
    ``index0``) and the copy it shows (``side``: ``"before · "``, ``"after · "`` or
    ``""``); a whole picture's ``layout`` is its size in activation units and the
    before | after halves' geometry (``units per half, start of the after half, its
    end, separator x``). ``coloured`` is the image on the colour scale (clipped, and
    signed-log at ``log_scale`` when that is set) and ``top`` its level."""

    image: np.ndarray
    scale: tuple[float, float]
    pre_cols: int
    gap: int
    level: float
    rect: tuple[float, float, float, float]
    coloured: np.ndarray
    top: float
    log_scale: float | None = None
    origin: tuple[float, float] = (0.0, 0.0)
    index0: tuple[int, int] = (0, 0)
    side: str = ""
    layout: tuple | None = None


@dataclass(frozen=True)
class ShapeDisplay:
    """One record's shape view, ready to draw (see the module docstring).

    ``shown`` is the kind of picture (``bars``, ``unit_norm``, ``row_norm``,
    ``feature_maps``, ``heatmap``, ``tokens``, ``top_k``, ``position_norm``);
    ``maps`` the full-resolution 2-D maps (after, before) a zoom pools from, with
    their ``read_kind`` and the top-k view's ``units``; ``norms`` row or unit norms
    and ``bars`` the bar values (after, before); ``extent`` ``(units, low, high)``
    of the bars."""

    kind: str
    view: str
    shape: tuple[int, ...]
    height_px: int
    width_px: int
    log_scale: float | None
    shown: str
    picture: Picture | None = None
    maps: tuple[torch.Tensor, torch.Tensor | None] | None = None
    read_kind: str = ""
    units: np.ndarray | None = None
    norms: tuple[np.ndarray, np.ndarray | None] | None = None
    bars: tuple[np.ndarray, np.ndarray | None] | None = None
    extent: tuple[int, float, float] | None = None

    def fits(self, kind: str, view: str, height_px: int, width_px: int,
             log_scale: float | None) -> bool:
        """Whether a panel that now shows ``view`` of a ``kind`` at this size and colour
        scale can draw this as it is (a picture's size within :data:`SIZE_TOLERANCE`)."""
        if (kind, view) != (self.kind, self.view):
            return False
        if self.picture is None:   # bars and norms do not depend on the size
            return True
        if log_scale != self.log_scale:
            return False
        have = image_pixels(self.height_px, self.width_px, False)
        now = image_pixels(height_px, width_px, False)
        return all(max(a, b) <= SIZE_TOLERANCE * min(a, b) for a, b in zip(have, now))


def effective_view(view: str | None, shape: tuple[int, ...] | None, kind: str) -> str:
    """The view drawn: ``view`` if the shape offers it (:func:`wide_views`), else ``map``."""
    return view if view is not None and view in wide_views(shape, kind) else "map"


def image_pixels(height_px: int, width_px: int, halves: bool) -> tuple[int, int]:
    """The most rows and columns an image of a plot this size is pooled to (before |
    after share the width)."""
    rows = max(MIN_IMAGE_PIXELS, int(height_px))
    cols = max(MIN_IMAGE_PIXELS, int(width_px))
    return rows, (max(MIN_IMAGE_PIXELS, cols // 2) if halves else cols)


def colour_scale(image: np.ndarray, level: float,
                 log_scale: float | None) -> tuple[np.ndarray, float]:
    """``image`` as the colour map reads it, and its top level: clipped to ±``level``
    (±Inf drawn as the extreme colour; NaN stays blank), signed-log at ``log_scale``."""
    img = np.clip(image, -level, level)
    if log_scale is None:
        return img, level
    return (signed_log(img, log_scale).astype(np.float32),
            float(signed_log(np.array(level), log_scale)))


def heat_map(t: torch.Tensor) -> torch.Tensor:
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


def map_sources(tensor: torch.Tensor, pre: torch.Tensor | None, kind: str, view: str
                ) -> tuple[torch.Tensor, torch.Tensor | None, str, np.ndarray | None]:
    """The full-resolution 2-D maps (after, before) of ``view``, the readout kind,
    and the top-k view's units (picked from both)."""
    if view == "top_k":
        units = top_units(tensor, kind, also=pre)
        return (top_k_picture(tensor, kind, units),
                top_k_picture(pre, kind, units) if pre is not None else None, "top_k", units)
    if view == "row_norm":   # feature maps: the norm over channels at each position
        h, w = tensor.shape[2], tensor.shape[3]
        return (torch.from_numpy(row_norms(tensor, kind)).reshape(h, w),
                torch.from_numpy(row_norms(pre, kind)).reshape(h, w) if pre is not None else None,
                "position_norm", None)
    if kind == "tokens":
        return picture(tensor, kind), picture(pre, kind) if pre is not None else None, "tokens", None
    return heat_map(tensor), heat_map(pre) if pre is not None else None, "heatmap", None


def _halves(pre_cols: int, gap: int, width: int, sx: float) -> tuple[float, float, float, float]:
    return (round(pre_cols * sx, 6), round((pre_cols + gap) * sx, 6), round(width * sx, 6),
            round((pre_cols + gap / 2) * sx, 6))


def _laid_out(post: np.ndarray, pre: np.ndarray | None, level: float, scale_of: Callable,
              log_scale: float | None) -> Picture:
    """Before | after side by side (or ``post`` alone), placed at the origin."""
    gap = 0 if pre is None else max(2, pre.shape[1] // 16)
    img = post if pre is None else side_by_side(pre, post, gap=gap)
    sy, sx = scale_of(post)
    halves = None if pre is None else _halves(pre.shape[1], gap, img.shape[1], sx)
    coloured, top = colour_scale(img, level, log_scale)
    return Picture(img, (sy, sx), pre.shape[1] if pre is not None else 0, gap, level,
                   (0.0, 0.0, img.shape[1] * sx, img.shape[0] * sy), coloured, top, log_scale,
                   layout=((round(img.shape[0] * sy), round(img.shape[1] * sx)), halves))


def whole_picture(post_m: torch.Tensor, pre_m: torch.Tensor | None, height_px: int, width_px: int,
                  log_scale: float | None = None) -> Picture:
    """A whole 2-D map (and its before copy) block-mean pooled to a plot of this size."""
    rows, cols = image_pixels(height_px, width_px, pre_m is not None)
    post = reduce_2d(post_m, rows, cols)
    pre = reduce_2d(pre_m, rows, cols) if pre_m is not None else None
    return _laid_out(post, pre, symmetric_level(post, pre),
                     lambda p: (post_m.shape[0] / p.shape[0], post_m.shape[1] / p.shape[1]),
                     log_scale)


def grid_picture(tensor: torch.Tensor, pre: torch.Tensor | None, kind: str, height_px: int,
                 width_px: int, log_scale: float | None = None) -> Picture:
    """The picture of ``view_image`` (a feature-map grid) for a plot of this size; its
    axes count the activation's rows and columns where it has them, not pixels."""
    rows, cols = image_pixels(height_px, width_px, pre is not None)
    post = view_image(tensor, kind, rows, cols)
    pre_img = view_image(pre, kind, rows, cols) if pre is not None else None
    full = full_size(tuple(tensor.shape), kind)
    return _laid_out(post, pre_img, symmetric_level(post, pre_img),
                     lambda p: (1.0, 1.0) if full is None else (full[0] / p.shape[0],
                                                                 full[1] / p.shape[1]),
                     log_scale)


def window_picture(post_m: torch.Tensor, pre_m: torch.Tensor | None, w: Window,
                   halves: tuple | None, level: float, height_px: int, width_px: int,
                   log_scale: float | None = None) -> Picture:
    """Only the rows and columns ``w`` of the map, pooled at the plot's resolution, on
    the whole map's colour ``level``; ``halves``: the whole picture's geometry."""
    if w.side == "both" and pre_m is not None and halves is not None:
        rows, cols = image_pixels(height_px, width_px, True)
        pre = pool_window(pre_m, w, rows, cols)
        post = pool_window(post_m, w, rows, cols)
        gap = max(2, pre.shape[1] // 16)
        img = side_by_side(pre, post, gap=gap)
        sy, sx = (w.r1 - w.r0) / post.shape[0], post_m.shape[1] / post.shape[1]
        coloured, top = colour_scale(img, level, log_scale)
        return Picture(img, (sy, sx), pre.shape[1], gap, level,
                       (0.0, float(w.r0), img.shape[1] * sx, img.shape[0] * sy), coloured, top,
                       log_scale, origin=(w.r0, 0.0), index0=(w.r0, 0))
    rows, cols = image_pixels(height_px, width_px, False)
    source = pre_m if w.side == "before" and pre_m is not None else post_m
    img = pool_window(source, w, rows, cols)
    x_off = halves[1] if w.side == "after" and halves is not None else 0.0
    sy, sx = (w.r1 - w.r0) / img.shape[0], (w.c1 - w.c0) / img.shape[1]
    coloured, top = colour_scale(img, level, log_scale)
    return Picture(img, (sy, sx), 0, 0, level,
                   (x_off + w.c0, float(w.r0), float(w.c1 - w.c0), float(w.r1 - w.r0)), coloured,
                   top, log_scale, origin=(w.r0, x_off + w.c0), index0=(w.r0, w.c0),
                   side=f"{w.side} · " if w.side in ("before", "after") else "")


def bar_extent(post: np.ndarray, pre: np.ndarray | None) -> tuple[int, float, float]:
    """``(bars, low, high)`` of bar values growing from zero (finite values only)."""
    lo, hi = 0.0, 0.0
    for v in (post, pre):
        if v is None:
            continue
        v = v[np.isfinite(v)]
        if v.size:
            lo, hi = min(lo, float(v.min())), max(hi, float(v.max()))
    return post.size, lo, hi


def shape_display(tensor: torch.Tensor | None, pre: torch.Tensor | None, kind: str, view: str,
                  height_px: int, width_px: int,
                  log_scale: float | None = None) -> ShapeDisplay | None:
    """What a panel draws of ``tensor`` (and ``pre``, what it is compared with) in
    ``view``, for a plot of this size in device pixels; ``None`` without a tensor."""
    if tensor is None or kind == "none":
        return None
    shape = tuple(tensor.shape)

    def made(shown: str, **parts: Any) -> ShapeDisplay:
        return ShapeDisplay(kind, view, shape, height_px, width_px, log_scale, shown, **parts)

    if kind == "bars":
        post_v = bars_values(tensor)
        pre_v = bars_values(pre) if pre is not None else None
        return made("bars", bars=(post_v, pre_v), extent=bar_extent(post_v, pre_v))
    if view == "unit_norm":
        return made("unit_norm", norms=(
            unit_norms(tensor, kind), unit_norms(pre, kind) if pre is not None else None))
    if view == "row_norm" and kind != "feature_maps":
        return made("row_norm", norms=(
            row_norms(tensor, kind), row_norms(pre, kind) if pre is not None else None))
    if kind == "feature_maps" and view == "map":
        return made("feature_maps",
                    picture=grid_picture(tensor, pre, kind, height_px, width_px, log_scale))
    post_m, pre_m, read_kind, units = map_sources(tensor, pre, kind, view)
    return made({"top_k": "top_k", "row_norm": "position_norm"}.get(view, kind),
                picture=whole_picture(post_m, pre_m, height_px, width_px, log_scale),
                maps=(post_m, pre_m), read_kind=read_kind, units=units)


def prepare_shape(record: Any, pre: torch.Tensor | None, wanted: ShapeWanted,
                  spread: ValueSpread) -> ShapeDisplay | None:
    """``record``'s :class:`ShapeDisplay` for a panel that shows ``wanted``; ``spread``:
    the values' spread (the log scale's default and its knee), as the panel reads it."""
    kind = view_kind(record.shape, record.tensor is not None)
    view = effective_view(wanted.view, record.shape, kind)
    log = wanted.log if wanted.log is not None else wants_log(spread.decades)
    return shape_display(record.tensor, pre, kind, view, wanted.height_px, wanted.width_px,
                         spread.typical if log else None)
