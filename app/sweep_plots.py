"""``hookscope sweep ... --save-plots DIR``: the grid as a PNG, drawn with Qt offscreen.

Two axes give a heat map (rows: the first axis, e.g. layer names; columns: the second,
e.g. token strings; a colour bar with the range), one axis a curve (the metric against the
axis's values). Over an input set (``--inputs``) the numbers are means: the heat map says
so in its title, and the curve draws a band of mean ± spread (the standard deviation over
the inputs) with a bar at each point, and stars the largest mean. Drawn with QPainter on a QImage, so no window opens and nothing but Qt's
GUI module is needed; Qt is imported here only, when the option is given. The file is
written whole or not at all (:func:`~hookscope.core.base.write_bytes`) and never replaces
a file the command reads.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from hookscope.core import HookscopeError, PlanError
from hookscope.core.base import ReadFiles, refuse_overwrite, write_bytes

from .plot_files import _app, plots_folder

#: Cells wider or taller than this are not drawn bigger.
CELL_MAX, CELL_MIN = 36, 6
#: Longest label drawn (characters); longer ones end in an ellipsis.
LABEL_CHARS = 40
# viridis at five stops: dark blue (low) to yellow (high), readable in grey too
_STOPS = [(68, 1, 84), (59, 82, 139), (33, 145, 140), (94, 201, 98), (253, 231, 37)]
#: A curve's picture: its size, and its plot box's margins (left, right, top, bottom).
CURVE_SIZE = (760, 480)
CURVE_MARGINS = (80, 30, 50, 90)
CURVE_COLOUR = (33, 110, 180)
#: Over an input set: the band of mean ± spread (light blue, opaque) and the largest
#: mean's star (red).
SPREAD_FILL = (200, 222, 242)
BEST_COLOUR = (214, 39, 40)


def check_plot_dir(folder: str) -> Path:
    """The folder ``--save-plots`` writes into, created if needed (before any forward)."""
    return plots_folder(folder)


def check_plot_axes(n_axes: int) -> None:
    if n_axes > 2:
        raise PlanError(f"--save-plots draws one axis (a curve) or two (a heat map), not "
                        f"{n_axes}; drop an axis or leave out --save-plots")


def plot_name(axes: Any) -> str:
    """The file a grid of these axes is drawn into."""
    return "sweep_heatmap.png" if len(axes) == 2 else "sweep_curve.png"


def save_plots(res: Any, folder: str | Path, reads: ReadFiles | None = None) -> list[Path]:
    """Draw ``res`` (a SweepResult of one or two axes) into ``folder``; the files written."""
    check_plot_axes(len(res.axes))
    out = plots_folder(folder) / plot_name(res.axes)
    refuse_overwrite([("--save-plots", str(out))], reads or ReadFiles())
    _app()
    from .qt_messages import offscreen_notes_dropped

    with offscreen_notes_dropped():
        data = _heatmap(res) if len(res.axes) == 2 else _curve(res)
    write_bytes(out, data)
    return [out]


def _short(text: str) -> str:
    text = "".join(c if c.isprintable() else "·" for c in text)
    return text if len(text) <= LABEL_CHARS else text[:LABEL_CHARS - 1] + "…"


def _colour(v: float, lo: float, hi: float) -> Any:
    from PySide6.QtGui import QColor

    if not math.isfinite(v):
        return QColor(150, 150, 150)
    t = 0.5 if hi <= lo else min(1.0, max(0.0, (v - lo) / (hi - lo)))
    f = t * (len(_STOPS) - 1)
    i = min(int(f), len(_STOPS) - 2)
    a, b, w = _STOPS[i], _STOPS[i + 1], f - i
    return QColor(*(round(a[k] + (b[k] - a[k]) * w) for k in range(3)))


def _range(values: np.ndarray) -> tuple[float, float]:
    finite = values[np.isfinite(values)]
    if finite.size == 0:
        return 0.0, 1.0
    return float(finite.min()), float(finite.max())


def _shown(res: Any) -> np.ndarray:
    """What a plot draws: the estimates of an estimated sweep (its values are the verified
    cells only), else the values."""
    return np.asarray(res.values if res.estimates is None else res.estimates, dtype=float)


def _title(res: Any) -> str:
    words = f"sweep: {res.metric}" + ("" if res.estimates is None else " (estimated, first order)")
    if res.per_input is not None:
        words += f" (mean over {len(res.per_input)} inputs)"
    if res.normalised is not None:
        words += " (normalised: 0 clean, 1 source)"
    elif res.baseline is not None:
        words += f"   baseline {res.baseline:.4g}"
    return _short(words) if len(words) > 90 else words


def _png(image: Any) -> bytes:
    from PySide6.QtCore import QBuffer, QByteArray, QIODevice

    buf = QByteArray()
    dev = QBuffer(buf)
    dev.open(QIODevice.OpenModeFlag.WriteOnly)
    if not image.save(dev, "PNG"):
        raise HookscopeError("--save-plots: Qt could not encode the PNG")
    dev.close()
    return bytes(buf.data())


def _heatmap(res: Any) -> bytes:
    from PySide6.QtCore import QRect, Qt
    from PySide6.QtGui import QColor, QFont, QFontMetrics, QImage, QPainter

    rows_name, cols_name = list(res.axes)
    rows = [_short(t) for t in res.axes[rows_name]]
    cols = [_short(t) for t in res.axes[cols_name]]
    values = _shown(res)
    font = QFont()
    font.setPixelSize(12)
    fm = QFontMetrics(font)
    cell = max(CELL_MIN, min(CELL_MAX, 900 // max(len(rows), len(cols))))
    left = max(fm.horizontalAdvance(t) for t in rows + [rows_name]) + 16
    bottom = max(fm.horizontalAdvance(t) for t in cols) + 40
    top, bar = 58, 90
    title = _title(res)
    w = max(left + cell * len(cols) + bar + 20, fm.horizontalAdvance(title) + 40)
    h = top + cell * len(rows) + bottom
    img = QImage(w, h, QImage.Format.Format_RGB32)
    img.fill(QColor("white"))
    lo, hi = _range(values)
    p = QPainter(img)
    try:
        p.setFont(font)
        p.setPen(QColor("black"))
        p.drawText(QRect(0, 8, w, 20), Qt.AlignmentFlag.AlignHCenter, title)
        for i in range(len(rows)):
            for j in range(len(cols)):
                p.fillRect(left + j * cell, top + i * cell, cell, cell,
                           _colour(float(values[i, j]), lo, hi))
        for i, t in enumerate(rows):
            p.drawText(QRect(0, top + i * cell, left - 6, cell),
                       int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter), t)
        p.drawText(QRect(0, top - 18, left - 6, 16), int(Qt.AlignmentFlag.AlignRight),
                   f"{rows_name} ↓")
        y0 = top + cell * len(rows) + 4
        for j, t in enumerate(cols):  # column labels read upwards, one under each column
            p.save()
            p.translate(left + j * cell + cell / 2 + fm.ascent() / 2 - 2, y0 + fm.horizontalAdvance(t))
            p.rotate(-90)
            p.drawText(0, 0, t)
            p.restore()
        p.drawText(QRect(left, h - 22, cell * len(cols), 18), Qt.AlignmentFlag.AlignHCenter,
                   f"{cols_name} →")
        bx, by, bh = left + cell * len(cols) + 20, top, max(cell * len(rows), 60)
        for k in range(bh):
            p.fillRect(bx, by + k, 16, 1, _colour(hi - (hi - lo) * k / max(1, bh - 1), lo, hi))
        p.drawText(bx + 20, by + fm.ascent(), f"{hi:.3g}")
        p.drawText(bx + 20, by + bh, f"{lo:.3g}")
    finally:
        p.end()
    return _png(img)


@dataclass(frozen=True)
class CurveFrame:
    """Where a curve's numbers fall in its picture: the x of each point (log10 where the
    axis is drawn in log scale), the ranges drawn and the plot's box in pixels."""

    xs: list[float]
    log: bool
    x_lo: float
    x_hi: float
    lo: float
    hi: float

    def at(self, x: float, y: float) -> tuple[float, float]:
        """The pixel ``(px, py)`` of the point ``(x, y)`` (``x`` as in :attr:`xs`)."""
        left, _right, top, _bottom = CURVE_MARGINS
        pw, ph = _plot_box()
        return (left + (x - self.x_lo) / (self.x_hi - self.x_lo) * pw,
                top + (self.hi - y) / (self.hi - self.lo) * ph)

    def point(self, i: int, y: float) -> tuple[float, float]:
        """The pixel of height ``y`` at the axis's ``i``-th value."""
        return self.at(self.xs[i], y)


def _plot_box() -> tuple[int, int]:
    left, right, top, bottom = CURVE_MARGINS
    return CURVE_SIZE[0] - left - right, CURVE_SIZE[1] - top - bottom


def spread_of(res: Any) -> np.ndarray | None:
    """The spread a curve draws around its means: over an input set (not for estimates,
    whose spread would be the real runs', around other numbers), else ``None``."""
    if res.spread is None or res.estimates is not None:
        return None
    return np.nan_to_num(np.asarray(res.spread, dtype=float).reshape(-1))


def curve_frame(res: Any) -> CurveFrame:
    """The frame :func:`save_plots` draws ``res`` (one axis) in: its y range holds the
    means and, over an input set, mean ± spread."""
    (name,) = list(res.axes)
    coords = res.coords[name]
    values = _shown(res).reshape(-1)
    numeric = all(isinstance(c, (int, float)) and not isinstance(c, bool) for c in coords)
    xs = [float(c) for c in coords] if numeric else [float(i) for i in range(len(coords))]
    log = numeric and len(xs) > 2 and min(xs) > 0 and max(xs) / min(xs) > 100
    if log:
        xs = [math.log10(v) for v in xs]
    sd = spread_of(res)
    drawn = values if sd is None else np.concatenate([values, values - sd, values + sd])
    lo, hi = _range(drawn)
    if hi <= lo:
        lo, hi = lo - 1, hi + 1
    x_lo, x_hi = min(xs), max(xs)
    if x_hi <= x_lo:
        x_lo, x_hi = x_lo - 1, x_hi + 1
    return CurveFrame(xs, log, x_lo, x_hi, lo, hi)


def best_point(res: Any) -> int | None:
    """The point of the largest mean of a curve over an input set, else ``None``."""
    values = _shown(res).reshape(-1)
    if spread_of(res) is None or not np.isfinite(values).any():
        return None
    return int(np.nanargmax(values))


def _star(cx: float, cy: float, r: float) -> Any:
    """A five-pointed star centred on ``(cx, cy)``, ``r`` pixels to its points."""
    from PySide6.QtCore import QPointF
    from PySide6.QtGui import QPolygonF

    pts = []
    for k in range(10):
        a = -math.pi / 2 + k * math.pi / 5
        rr = r if k % 2 == 0 else r * 0.45
        pts.append(QPointF(cx + rr * math.cos(a), cy + rr * math.sin(a)))
    return QPolygonF(pts)


def _curve(res: Any) -> bytes:
    from PySide6.QtCore import QPointF, QRect, Qt
    from PySide6.QtGui import QColor, QFont, QImage, QPainter, QPainterPath, QPen

    (name,) = list(res.axes)
    coords = res.coords[name]
    # numbers to 4 significant digits (1.143, not 1.1428571428571428: those overlap)
    labels = ([f"{c:.4g}" for c in coords] if coords and all(isinstance(c, float) for c in coords)
              else [_short(t) for t in res.axes[name]])
    values = _shown(res).reshape(-1)
    frame = curve_frame(res)
    xs, lo, hi = frame.xs, frame.lo, frame.hi
    sd = spread_of(res)
    best = best_point(res)
    w, h = CURVE_SIZE
    left, _right, top, _bottom = CURVE_MARGINS
    pw, ph = _plot_box()
    img = QImage(w, h, QImage.Format.Format_RGB32)
    img.fill(QColor("white"))
    font = QFont()
    font.setPixelSize(12)

    def at(x: float, y: float) -> QPointF:
        return QPointF(*frame.at(x, y))

    p = QPainter(img)
    try:
        p.setRenderHint(QPainter.RenderHint.Antialiasing)
        p.setFont(font)
        p.setPen(QColor("black"))
        p.drawText(QRect(0, 8, w, 20), Qt.AlignmentFlag.AlignHCenter, _title(res))
        if sd is not None:
            n = len(res.per_input) if res.per_input is not None else 0
            p.drawText(QRect(0, 24, w, 18), Qt.AlignmentFlag.AlignHCenter,
                       f"mean over {n} inputs; band: mean ± spread (std over the inputs)"
                       + ("; ★ the largest mean" if best is not None else ""))
        p.drawRect(left, top, pw, ph)
        for k in range(5):  # y ticks
            y = lo + (hi - lo) * k / 4
            pt = at(frame.x_lo, y)
            p.drawLine(left - 4, round(pt.y()), left, round(pt.y()))
            p.drawText(QRect(0, round(pt.y()) - 8, left - 8, 16),
                       int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter), f"{y:.3g}")
        step = max(1, len(xs) // 12)
        for k in range(0, len(xs), step):  # x ticks, labelled by the axis's own labels
            pt = at(xs[k], lo)
            p.drawLine(round(pt.x()), top + ph, round(pt.x()), top + ph + 4)
            p.drawText(QRect(round(pt.x()) - 50, top + ph + 6, 100, 16),
                       Qt.AlignmentFlag.AlignHCenter, labels[k])
        p.drawText(QRect(left, h - 40, pw, 18), Qt.AlignmentFlag.AlignHCenter,
                   f"{name}{' (log scale)' if frame.log else ''} →")
        p.save()
        p.translate(16, top + ph / 2 + 40)
        p.rotate(-90)
        p.drawText(0, 0, _short(res.metric))
        p.restore()
        finite = [k for k, v in enumerate(values) if math.isfinite(v)]
        if sd is not None and finite:   # the band first: the curve is drawn over it
            band = QPainterPath(at(xs[finite[0]], values[finite[0]] + sd[finite[0]]))
            for k in finite[1:]:
                band.lineTo(at(xs[k], values[k] + sd[k]))
            for k in reversed(finite):
                band.lineTo(at(xs[k], values[k] - sd[k]))
            band.closeSubpath()
            p.setPen(Qt.PenStyle.NoPen)
            p.setBrush(QColor(*SPREAD_FILL))
            p.drawPath(band)
            p.setPen(QPen(QColor(*CURVE_COLOUR), 1))
            for k in finite:   # and a bar at each point
                p.drawLine(at(xs[k], values[k] - sd[k]), at(xs[k], values[k] + sd[k]))
        p.setPen(QPen(QColor(*CURVE_COLOUR), 2))
        pts = [at(xs[k], values[k]) for k in finite]
        for a, b in zip(pts, pts[1:]):
            p.drawLine(a, b)
        p.setBrush(QColor(*CURVE_COLOUR))
        for pt in pts:
            p.drawEllipse(pt, 3.5, 3.5)
        if best is not None:
            c = at(xs[best], values[best])
            p.setPen(QPen(QColor("black"), 1))
            p.setBrush(QColor(*BEST_COLOUR))
            p.drawPolygon(_star(c.x(), c.y(), 9))
    finally:
        p.end()
    return _png(img)
