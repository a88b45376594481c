"""The two draggable bound lines of a histogram, tied straight to the session.

:class:`BoundLines` places the low and high lines from the session's plan (the
bounds of the layer's intervention, for any kind with two bounds: core's
``bound_params``) and writes a drag straight back into the session
(``Session.intervene``, the steps of one drag merged into one undo step). It
keeps no copy of a bound: the plan is read whenever the lines are placed, and
each line has one writer, the plan's placement, except while the mouse holds it.
The histogram it belongs to (:class:`~.histogram_view.HistogramView`) gives it
the value axis (``fwd``/``inv``, the data's range, the fitted x range).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import pyqtgraph as pg
from PySide6.QtCore import QObject, Qt

from hookscope.core import HookscopeError, Session, SessionEvent
from hookscope.core.plan import dragged, plan_bounds

from .value_format import format_bound

if TYPE_CHECKING:
    from .histogram_view import HistogramView

BOUND_COLOUR = (214, 39, 40)
OPEN_BOUND_COLOUR = (150, 150, 150)
_LABEL_TOP = 0.93     # a label's first height (fraction of the plot); place_labels refines it
_EDGE_PX = 7           # an open bound's handle sits this many pixels inside the view's edge


def snap(v: float, span: float) -> float:
    """A dragged bound rounded to a thousandth of the values' span: the tree,
    the line's label and the plan then show the same short number."""
    if not math.isfinite(v) or span <= 0:
        return v
    step = 10.0 ** math.floor(math.log10(span / 1000.0))
    return float(f"{round(v / step) * step:.12g}")


class BoundLines(QObject):
    """The low and high lines of ``hist`` for layer ``path`` of ``session``'s plan."""

    def __init__(self, hist: "HistogramView", session: Session, path: str) -> None:
        super().__init__(hist)
        self.hist = hist
        self.session = session
        self.path = path
        self._quiet = False
        self._placed: tuple | None = None  # (bounds, data range) the lines were placed for
        self._plan_seen = session.plan
        self.lo_line = self._bound_line("low")
        self.hi_line = self._bound_line("high")
        hp = hist.widget.getPlotItem()
        hp.addItem(self.lo_line, ignoreBounds=True)
        hp.addItem(self.hi_line, ignoreBounds=True)
        # The lines run over the bars: the values a clamp piles up at a bound
        # (its spike, the point of the lesson) would otherwise hide the line.
        self.lo_line.setZValue(4)
        self.hi_line.setZValue(4)
        unsubscribe = session.subscribe(self._on_session)
        self.destroyed.connect(lambda *_: unsubscribe())

    # -- the session ---------------------------------------------------------------
    def bounds(self) -> tuple[float, float] | None:
        """The layer's bounds as the session's plan has them (``None``: no bounded
        intervention; an open end is ``±inf``)."""
        return plan_bounds(self.session.plan, self.path)

    def _on_session(self, _ev: SessionEvent) -> None:
        plan = self.session.plan
        if plan is not self._plan_seen:   # an edit, an undo, a loaded setup: follow it
            self._plan_seen = plan
            self.place()

    def moving(self) -> bool:
        """The mouse holds one of the lines."""
        return bool(self.lo_line.moving or self.hi_line.moving)

    # -- placing ---------------------------------------------------------------------
    def place(self) -> None:
        """Put the lines where the plan's bounds are, for the data range drawn."""
        bounds = self.bounds()
        placed = (bounds, self.hist.data_range)
        if placed == self._placed and not self.moving():
            return  # already there: pens and labels re-made for nothing cost ~0.3 ms a panel
        self._placed = placed
        lo, hi = bounds if bounds else (-math.inf, math.inf)
        x0, x1 = self.hist.fit_x()
        fwd = self.hist.fwd
        self._quiet = True
        try:
            self.lo_line.setBounds((None, None))  # old limits must not clip the new values
            self.hi_line.setBounds((None, None))
            for line, v, word in ((self.lo_line, lo, "low"), (self.hi_line, hi, "high")):
                off_scale = math.isfinite(v) and not (x0 <= fwd(v) <= x1)
                open_end = math.isinf(v)
                if not line.moving:  # never yank a line out from under the mouse
                    line.setValue(self._edge(word) if open_end or off_scale else fwd(v))
                colour = OPEN_BOUND_COLOUR if open_end else BOUND_COLOUR
                line.setPen(pg.mkPen(colour, width=1.5,
                                     style=Qt.PenStyle.DashLine if off_scale or open_end
                                     else Qt.PenStyle.SolidLine))
                if open_end:
                    line.label.setFormat(f"{word}: none")
                    line.setToolTip(f"No {word} bound: drag this line to clamp the {word} end")
                elif off_scale:
                    line.label.setFormat(f"{word} {format_bound(v)} (off scale)")
                else:
                    line.label.setFormat(f"{word} {format_bound(v)}")
            self._update_line_limits()
        finally:
            self._quiet = False
        self.place_labels()

    def place_labels(self, *_args) -> None:
        """Low's label left of the low line, high's right of the high line, so close
        bounds never label across each other; a label without room on its side
        (a line near the plot's edge) goes inside, and the low one steps down if
        the two would then meet."""
        vb = self.hist.widget.getPlotItem().getViewBox()
        (x0, x1), _ = vb.viewRange()
        width = vb.width() if vb.width() > 1 else 300.0
        scale = width / max(x1 - x0, 1e-12)
        self.keep_handles_at_edges()
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
        # Heights in pixels (a label is ~22 px whatever the plot's height), as fractions.
        height = vb.height() if vb.height() > 1 else 190.0
        label_h = self.hi_line.label.textItem.boundingRect().height()
        step = (label_h + 2) / height
        top = 1.0 - (label_h / 2 + 2) / height
        down = step if self.hist.spike_note.isVisible() else 0.0
        high_pos = top - down
        low_pos = (top - step if a0 < b1 and b0 < a1 else top) - down
        for line, pos in ((self.lo_line, low_pos), (self.hi_line, high_pos)):
            if line.label.orthoPos != pos:
                line.label.setPosition(pos)

    def _edge(self, word: str) -> float:
        """Where an open (or off-scale) bound's handle sits: just inside the view's
        left or right edge, at any plot width."""
        vb = self.hist.widget.getPlotItem().getViewBox()
        (x0, x1), _ = vb.viewRange()
        inset = _EDGE_PX * (x1 - x0) / (vb.width() if vb.width() > 1 else 300.0)
        return x0 + inset if word == "low" else x1 - inset

    def keep_handles_at_edges(self) -> None:
        """After a resize or zoom, move open and off-scale handles back to the edges."""
        lo, hi = self.bounds() or (-math.inf, math.inf)
        x0, x1 = self.hist.widget.getPlotItem().getViewBox().viewRange()[0]
        quiet, self._quiet = self._quiet, True
        try:
            for line, v, word in ((self.lo_line, lo, "low"), (self.hi_line, hi, "high")):
                if line.moving or (math.isfinite(v) and x0 <= self.hist.fwd(v) <= x1):
                    continue
                edge = self._edge(word)
                if abs(float(line.value()) - edge) > 1e-12 * max(1.0, abs(edge)):
                    line.setBounds((None, None))
                    line.setValue(edge)
            self._update_line_limits()
        finally:
            self._quiet = quiet

    # -- dragging --------------------------------------------------------------
    def _bound_line(self, word: str) -> pg.InfiniteLine:
        line = pg.InfiniteLine(angle=90, movable=True, pen=pg.mkPen(BOUND_COLOUR, width=1.5),
                               hoverPen=pg.mkPen(BOUND_COLOUR, width=4),
                               label=f"{word}: none",
                               labelOpts={"position": _LABEL_TOP,
                                          "color": (60, 60, 60), "fill": (255, 255, 255, 200)})
        line.setToolTip(f"Drag to change the clamp's {word} bound")
        line.sigPositionChanged.connect(lambda _l: self._on_line_moved(word, finished=False))
        line.sigPositionChangeFinished.connect(lambda _l: self._on_line_moved(word, finished=True))
        return line

    def _on_line_moved(self, word: str, finished: bool) -> None:
        """A bound line moved (by the mouse): write the bound it now shows into the
        session's plan. Only the moved bound changes; the other keeps the plan's
        value, so an open end (``±inf``) stays open. The steps of one drag are one
        undo step; the end of the drag seals it."""
        if self._quiet:
            return
        self._placed = None  # the lines are no longer where place() put them
        lo_d, hi_d = self.hist.inv(self.hist.data_range[0]), self.hist.inv(self.hist.data_range[1])
        line = self.lo_line if word == "low" else self.hi_line
        v = snap(self.hist.inv(float(line.value())), hi_d - lo_d)
        s = self.session
        try:
            iv = dragged(s.plan.intervention_for(self.path), word == "high", v)
        except HookscopeError:
            self.place()   # a refused bound: the line goes back to the plan's
            return
        lo, hi = iv.bounds() or (-math.inf, math.inf)
        # The label shows the bound as the tree and the plan will: one precision.
        line.label.setFormat(f"{word} {format_bound(lo if word == 'low' else hi)}")
        line.setPen(pg.mkPen(BOUND_COLOUR, width=1.5))
        self._update_line_limits()
        s.intervene(self.path, iv, merge=self.path)
        if finished:
            s.history.seal()   # the drag is over: the next edit is a new undo step
            self.place()
        self.place_labels()

    def _update_line_limits(self) -> None:
        """Each line stops at the other, so low never passes high."""
        quiet, self._quiet = self._quiet, True
        try:
            lo_v, hi_v = float(self.lo_line.value()), float(self.hi_line.value())
            self.lo_line.setBounds((None, hi_v))
            self.hi_line.setBounds((lo_v, None))
        finally:
            self._quiet = quiet
