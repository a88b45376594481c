"""The model's output without and with the interventions, side by side.

:class:`OutputComparison` draws the two flattened outputs of a
:class:`~hookscope.core.RunResult`: grouped bars for a few values (up to
:data:`MAX_BARS`), overlaid lines plus their difference for more, and says in
one sentence whether the intervention changed anything and by how much. The
numbers are the core's: a result made by the window's runner carries them
flattened and described (``result.display``, made in the runner's thread); one
made by hand is flattened here (:func:`hookscope.core.views.flat_array`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QComboBox, QHBoxLayout, QLabel, QSizePolicy, QVBoxLayout, QWidget

from hookscope.core import RunResult
from hookscope.core.views import (OUTPUT_BARS, ResultDisplay, describe_outputs, flat_array,
                                  image_boxes, image_size, input_image)
from hookscope.core.base import DETECTIONS, GENERIC, OutputMeaning
from hookscope.core.engine import output_verdict, plan_effect

from .plot_readouts import bar_cell
from .output_meaning import OutputMeaningView
from .plot_style import index_axes, peak_envelope, plain_axes, set_label
from .plot_tools import PlotTools

MAX_BARS = OUTPUT_BARS
WITHOUT_COLOUR = (31, 119, 180)   # blue
WITH_COLOUR = (255, 127, 14)      # orange
DIFF_COLOUR = (214, 39, 40)
_NB, _WJ = "\u00a0", "\u2060"   # no-break space, word joiner


def verdict(result: RunResult, without: np.ndarray, with_: np.ndarray) -> str:
    """One sentence a learner understands: did the plan change the output? (core's
    :func:`~hookscope.core.engine.verdict.output_verdict`, the CLI's words, for every kind)."""
    # "|Δ| = 0.46" is one unit: word joiners and no-break spaces keep Qt from
    # breaking the line after a "|" (a break opportunity in Unicode's rules).
    return output_verdict(result).replace(
        "|Δ| = ", f"{_NB}|{_WJ}Δ{_WJ}|{_WJ}{_NB}{_WJ}={_WJ}{_NB}{_WJ}")


def receipt_words(r: Any) -> str:
    """One intervention's receipt in a few words: calls, % changed, relative size, alarm."""
    words = (f"{r.path}: fired {r.fired_calls}×, {100 * r.changed_fraction:.3g}% changed, "
             f"|Δ|/|x| {r.relative_change:.2g}")
    return words + (f" — ALARM: {r.alarm.split(':')[0]}" if r.alarm else "")


def batch_size(output: Any) -> int:
    """The batch of a single-tensor output of two or more dimensions (1 for anything else):
    the plot shows one sample at a time, not every sample's values end to end."""
    shape = getattr(output, "shape", None)
    return int(shape[0]) if shape is not None and len(shape) >= 2 else 1


def _hex(rgb: tuple[int, int, int]) -> str:
    return "#%02x%02x%02x" % rgb


class OutputComparison(QWidget):
    """Before/after view of a run's output (object name ``outputComparison``).

    ``readout(str)`` says which output the cursor points at and its values;
    :meth:`set_labels` names the outputs (class labels, tokens) in it.
    """

    readout = Signal(str)

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("outputComparison")
        self.mode = "bars"
        self.labels: list[str] | None = None
        self._without = np.zeros(0)
        self._with = np.zeros(0)

        self.summary = QLabel("Run the model to compare its output without and with the interventions.",
                              self)
        self.summary.setObjectName("outputSummary")
        self.summary.setWordWrap(True)
        self.summary.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)

        self.graphics = pg.GraphicsLayoutWidget(self)
        self.graphics.setBackground("w")
        # ~110 px of plot at the least (two plots of ~75 px when they differ): with a
        # next-token table below, the output dock of a 1000×650 window still shows all of it.
        self.graphics.setMinimumHeight(180)
        # Output indices are counted: whole-number ticks only, never "0.5".
        self.plot = plain_axes(self.graphics.addPlot(row=0, col=0, axisItems=index_axes("bottom")))
        self.plot.setMenuEnabled(False)
        self.plot.setLabel("left", "output value")
        self.plot.showGrid(y=True, alpha=0.3)
        self.diff_plot = plain_axes(self.graphics.addPlot(row=1, col=0, axisItems=index_axes("bottom")))
        self.diff_plot.setMenuEnabled(False)
        self.diff_plot.setLabel("left", "with − without")
        self.diff_plot.setLabel("bottom", "output index")
        self.diff_plot.setXLink(self.plot)
        for plot in (self.plot, self.diff_plot):
            plot.getAxis("bottom").set_integer(True)
        self.graphics.ci.layout.setRowStretchFactor(0, 3)
        self.graphics.ci.layout.setRowStretchFactor(1, 2)

        # A legend line above the plot, so it never hides a bar.
        self.legend = QLabel(self)
        self.legend.setObjectName("outputLegend")
        self.legend.setTextFormat(Qt.TextFormat.RichText)
        # which sample of a batched output the plot shows
        self.sample_box = QComboBox(self)
        self.sample_box.setObjectName("outputSample")
        self.sample_box.setToolTip("The batch has several samples: the plot shows this one")
        self.sample_box.hide()
        self.sample_box.currentIndexChanged.connect(lambda _i: self._draw())
        self._result: RunResult | None = None

        # Every item is made once; show_result only feeds them new data.
        self.bars_without = pg.BarGraphItem(x=[0], height=[0], width=0.4,
                                            brush=pg.mkBrush(WITHOUT_COLOUR), pen=pg.mkPen(None))
        self.bars_with = pg.BarGraphItem(x=[0], height=[0], width=0.4,
                                         brush=pg.mkBrush(WITH_COLOUR), pen=pg.mkPen(None))
        # Solid 1-px pens over a peak envelope (peak_envelope): a dashed or wide pen
        # over half a million points took Qt tens of seconds to stroke.
        self.line_without = pg.PlotDataItem(pen=pg.mkPen(WITHOUT_COLOUR, width=1))
        self.line_with = pg.PlotDataItem(pen=pg.mkPen(WITH_COLOUR, width=1))
        self.line_diff = pg.PlotDataItem(pen=pg.mkPen(DIFF_COLOUR, width=1))

        for item in (self.bars_without, self.bars_with, self.line_without, self.line_with):
            self.plot.addItem(item)
        self.diff_plot.addItem(self.line_diff)
        self.diff_plot.addItem(pg.InfiniteLine(pos=0, angle=0, pen=pg.mkPen((120, 120, 120))))
        self._apply_mode("bars")
        self.tools = PlotTools(self.graphics, "output", {self.plot.getViewBox(): (True, True),
                                                         self.diff_plot.getViewBox(): (True, True)},
                               self._text_at, self.rows, self.reset_view)
        self.tools.readout.connect(self.readout)

        # What each intervention did (its receipt): a few words each, on their own lines
        # under the legend (beside it they were clipped, or pushed out by the sample
        # chooser), every receipt in full and the plan's output effect in the tooltip.
        self.receipts = QLabel(self)
        self.receipts.setObjectName("outputReceipts")
        self.receipts.setWordWrap(True)
        self.receipts.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Minimum)
        self.receipts.hide()

        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addWidget(self.summary)
        legend_row = QHBoxLayout()
        legend_row.addWidget(self.legend, 1)
        legend_row.addWidget(self.sample_box)
        layout.addLayout(legend_row)
        layout.addWidget(self.receipts)
        layout.addWidget(self.graphics, 1)
        # the output by meaning (top classes, next tokens, leaves), when there is one
        self.meaning_view = OutputMeaningView(self)
        self.meaning_view.hide()
        layout.addWidget(self.meaning_view, 2)  # for classes and tokens it says more than the plot

    # -- public API ------------------------------------------------------------
    def show_result(self, result: RunResult, meaning: OutputMeaning | None = None,
                    inputs: Any = None) -> None:
        """Draw ``result``'s outputs and say what changed; with a ``meaning`` (or a large
        output) also the table of what it means."""
        self._result = result
        batch = min(batch_size(result.output_without), batch_size(result.output_with))
        if batch != self.sample_box.count():
            self.sample_box.blockSignals(True)
            self.sample_box.clear()
            self.sample_box.addItems([f"sample {i} of {batch}" for i in range(batch)])
            self.sample_box.setCurrentIndex(0)
            self.sample_box.blockSignals(False)
        self.sample_box.setVisible(batch > 1)
        d = result.display if isinstance(result.display, ResultDisplay) else None
        self._draw()
        if d is not None:
            whole_without, whole_with = d.without, d.with_
        else:
            whole_without, whole_with = flat_array(result.output_without), flat_array(result.output_with)
        n = max(whole_without.size, whole_with.size)
        self.summary.setText(verdict(result, whole_without, whole_with))
        self.receipts.setText("\n".join(receipt_words(r) for r in result.receipts.values()))
        self.receipts.setToolTip("\n".join([*(r.line() for r in result.receipts.values()),
                                            plan_effect(result.receipts)]))
        self.receipts.setVisible(bool(result.receipts))
        meaningful = meaning is not None and meaning.kind != GENERIC
        picture = d.input_picture if d is not None else None
        if meaningful or n > MAX_BARS:
            if d is None or d.description is None:
                desc = describe_outputs(result.output_without, result.output_with, meaning, inputs)
                picture = input_image(inputs)
            else:
                desc = d.description
            self.meaning_view.show_description(desc)
            self.meaning_view.show_input_image(picture)
        # a detector's flattened boxes/labels/scores mean nothing as one series: draw the boxes
        detections = meaning is not None and meaning.kind == DETECTIONS
        if detections:
            if d is not None and d.boxes is not None:
                hw, boxes = d.image_hw, d.boxes
            else:
                hw, picture = image_size(inputs), input_image(inputs)
                boxes = (image_boxes(result.output_without, meaning, inputs),
                         image_boxes(result.output_with, meaning, inputs))
            self.meaning_view.show_detections(picture, boxes[0], boxes[1], hw[::-1] if hw else None)
        self.graphics.setVisible(not detections)
        self.legend.setVisible(not detections)
        self.meaning_view.setVisible(meaningful or n > MAX_BARS)

    def _draw(self) -> None:
        """The plot of the shown sample (the whole output when it has no batch)."""
        result = self._result
        if result is None:
            return
        pick = (lambda o: o[self.sample_box.currentIndex()]) if self.sample_box.count() > 1 \
            else (lambda o: o)
        d = result.display if isinstance(result.display, ResultDisplay) else None
        if d is not None and self.sample_box.count() <= 1:   # flattened in the runner's thread
            without, with_ = d.without, d.with_
        else:
            without, with_ = flat_array(pick(result.output_without)), flat_array(pick(result.output_with))
        self._without, self._with = without, with_
        n = max(without.size, with_.size)
        # the difference plot only when there is a difference: a flat zero line takes
        # half of a small dock's height from the outputs themselves
        self._apply_mode("bars" if n <= MAX_BARS else "lines", diff=bool(result.outputs_differ))
        where = (f"output index (sample {self.sample_box.currentIndex()})"
                 if self.sample_box.count() > 1 else "output index")
        if self.mode == "bars":
            self.bars_without.setOpts(x=np.arange(without.size) - 0.2, height=without, width=0.4)
            self.bars_with.setOpts(x=np.arange(with_.size) + 0.2, height=with_, width=0.4)
            set_label(self.plot, "bottom", where)
        else:
            self.line_without.setData(*peak_envelope(without))
            self.line_with.setData(*peak_envelope(with_))
            m = min(without.size, with_.size)
            self.line_diff.setData(*peak_envelope(with_[:m] - without[:m]))
            set_label(self.plot, "bottom", None if self.diff_shown else where)
        self.diff_plot.setLabel("bottom", where)
        self.plot.enableAutoRange()
        self.diff_plot.enableAutoRange()

    def set_labels(self, labels: list[str] | None) -> None:
        """Names of the outputs (e.g. class labels) for the readout and the CSV."""
        self.labels = list(labels) if labels else None

    def reset_view(self) -> None:
        self.plot.enableAutoRange()
        self.diff_plot.enableAutoRange()

    def _text_at(self, vb, point) -> str | None:
        without, with_ = self._without, self._with
        if not without.size and not with_.size:
            return None
        if vb is self.diff_plot.getViewBox():
            i = int(round(point.x()))
            m = min(without.size, with_.size)
            if not 0 <= i < m:
                return None
            label = f" ({self.labels[i]})" if self.labels and i < len(self.labels) else ""
            return f"output {i}{label}: with − without {with_[i] - without[i]:.4g}"
        return bar_cell(point.x(), without, with_, self.labels, ("without", "with"), "output")

    def rows(self) -> tuple[list[str], list[list]]:
        """The outputs as CSV rows: index, label (if named), without, with."""
        n = max(self._without.size, self._with.size)
        get = lambda a, i: float(a[i]) if i < a.size else ""  # noqa: E731
        if self.labels:
            return (["index", "label", "without", "with"],
                    [[i, self.labels[i] if i < len(self.labels) else "", get(self._without, i),
                      get(self._with, i)] for i in range(n)])
        return ["index", "without", "with"], [[i, get(self._without, i), get(self._with, i)]
                                              for i in range(n)]

    def values(self) -> tuple[np.ndarray, np.ndarray]:
        """The flattened outputs shown: (without, with)."""
        return self._without.copy(), self._with.copy()

    def clear(self) -> None:
        self._result = None
        self.sample_box.hide()
        self._without, self._with = np.zeros(0), np.zeros(0)
        for item in (self.bars_without, self.bars_with):
            item.setOpts(x=[0], height=[0])
        for item in (self.line_without, self.line_with, self.line_diff):
            item.setData([], [])
        self.summary.setText("Run the model to compare its output without and with the interventions.")
        self.receipts.clear()
        self.receipts.hide()

    # -- internals -------------------------------------------------------------
    def _apply_mode(self, mode: str, diff: bool = True) -> None:
        self.mode = mode
        bars = mode == "bars"
        self.diff_shown = not bars and diff
        for item in (self.bars_without, self.bars_with):
            item.setVisible(bars)
        for item in (self.line_without, self.line_with):
            item.setVisible(not bars)
        self.diff_plot.setVisible(self.diff_shown)
        # A hidden plot keeps its row in the layout: collapse the row without it.
        grid = self.graphics.ci.layout
        grid.setRowMaximumHeight(1, 1e6 if self.diff_shown else 0)
        grid.setRowStretchFactor(1, 2 if self.diff_shown else 0)
        mark = "■" if bars else "━"
        entries = [f"<span style='color:{_hex(WITHOUT_COLOUR)}'>{mark}</span> without",
                   f"<span style='color:{_hex(WITH_COLOUR)}'>{mark}</span> with the intervention"]
        if self.diff_shown:
            entries.append(f"<span style='color:{_hex(DIFF_COLOUR)}'>━</span> difference (below)")
        self.legend.setText("&nbsp;&nbsp;&nbsp;".join(entries))
