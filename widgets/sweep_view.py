"""The Sweep dock: axes, a template, a source input, the vectors the template names, the
inputs (the window's, or an input set: each cell then the mean over it) and a metric; before
a run, the number of runs and an estimate of time and memory; Run and Cancel with a progress
bar and its ETA; the grid as a heatmap (a curve for one axis, or for a row picked in Show)
that fills in cell by cell (over an input set: whole, once every input ran).

Estimate draws every cell's first-order estimate at once (one forward and one backward);
Verify top K runs for real the K cells whose estimate moves furthest, outlines them, and
plots estimate against actual with their Spearman ρ.

Axes can be typed (``layer=blocks.*; pos=all``), set from the layer tree's menu
(:meth:`set_axis`) or, for token positions, picked in the token strip here. Clicking a
cell asks for that cell's run in the main view (``cellChosen``).

Holds no state beyond what it shows: Run, Cancel, "from the editor" and Browse… are signals
the app answers.
"""

from __future__ import annotations

import math
import time

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtWidgets import (QFormLayout, QFrame, QHBoxLayout, QLabel, QLineEdit,
                               QProgressBar, QPushButton, QScrollArea, QSpinBox, QSplitter,
                               QVBoxLayout, QWidget)

from hookscope.core.analyses import SweepResult
from hookscope.widgets.estimate_scatter import EstimateScatter, rho_text
from hookscope.widgets.named import named
from hookscope.widgets.sweep_fields import MetricChooser, WrapLabel, axis_pairs, with_axis
from hookscope.widgets.sweep_plot import SweepPlot
from hookscope.widgets.sweep_plot_area import SweepPlotArea
from hookscope.widgets.token_strip import TokenStrip

POSITION_AXIS = "pos"


def seconds(s: float) -> str:
    """``0.4 s``, ``12 s``, ``3 min 20 s``."""
    if not math.isfinite(s):
        return "?"
    if s < 1:
        return f"{s * 1e3:.0f} ms"
    if s < 10:
        return f"{s:.1f} s"
    if s < 60:
        return f"{s:.0f} s"
    m, r = divmod(int(round(s)), 60)
    return f"{m} min {r:02d} s" if m < 60 else f"{m // 60} h {m % 60:02d} min"


class SweepView(QWidget):
    """Fields, estimate, Run/Cancel, progress and the plot (object names ``sweep*``)."""

    runRequested = Signal(str, str, str, str)  # axes, template, source input, metric
    #: axes, template, source input, metric, and how many cells to verify (0: estimate only)
    estimateRequested = Signal(str, str, str, str, int)
    cancelRequested = Signal()
    cellChosen = Signal(int, int)   # row, column of a clicked cell (0 for one axis)
    fieldsChanged = Signal()        # (debounced) the app states the runs and the estimate
    templateRequested = Signal()    # "From editor": the app fills the template
    inputsRequested = Signal()      # "Browse…" beside Inputs: the app asks for a file

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.axes = named(QLineEdit("layer=blocks.*; pos=all"), "sweepAxes")
        self.axes.setToolTip("AXIS=VALUES separated by ';' (the first axis runs down, the "
                             "second across): a layer pattern or list (blocks.*, or the tree's "
                             "menu 'Sweep over these layers'), pos=all or positions picked "
                             "below, A:B, a comma list, linspace(A,B,N), logspace(A,B,N)")
        self.tokens = TokenStrip()
        self.tokens.setObjectName("sweepTokens")
        self.tokens.setToolTip("Click tokens to sweep over their positions (the pos axis); "
                               "none picked: every position")
        self.tokens_label = QLabel("Positions")
        self.template = named(QLineEdit("{layer}=patch@pos={pos}"), "sweepTemplate")
        self.template.setToolTip("LAYER=KIND with {AXIS} placeholders, e.g. {layer}=zero@units={unit} "
                                 "or blocks.2=scale:{f}; several separated by ';'")
        self.from_editor = named(QPushButton("From editor"), "sweepFromEditor")
        self.from_editor.setToolTip("Use the intervention set in the Intervention panel for the "
                                    "selected layer, its layer and positions made axes")
        self.source = named(QLineEdit(""), "sweepSource")
        self.source.setPlaceholderText("text:... (the input a bare patch takes)")
        self.vectors = named(QLineEdit(""), "sweepVectors")
        self.vectors.setPlaceholderText("v=diff:text:A|text:B (for add:v:{alpha})")
        self.vectors.setToolTip("Vectors the template names (add:v:{alpha}, project:v): "
                                "NAME=diff:INPUT_A|INPUT_B (a layer's output on A minus on B, "
                                "computed where the model runs) or NAME=FILE (.pt, "
                                ".safetensors, .npy); several separated by ';'")
        self.inputs = named(QLineEdit(""), "sweepInputs")
        self.inputs.setPlaceholderText("the window's input; or a set: each cell its mean")
        self.inputs.setToolTip("Empty: the sweep runs on the window's input. A prompt file "
                               "(.txt, .jsonl), a batch (.pt, .safetensors) or a folder of "
                               "images (the sets File → Open inputs… and hookscope scan read): "
                               "every cell runs on every input, and shows the mean over them "
                               "with its spread (the standard deviation over the inputs)")
        self.inputs_button = named(QPushButton("Browse…"), "sweepInputsBrowse")
        self.inputs_button.setToolTip("Pick a prompt or batch file, or an image of a folder "
                                      "of images (the folder is the set)")
        self.metric_box = MetricChooser()
        # the runs, time and memory a run would take (not the first-order estimate)
        self.estimate = named(WrapLabel(""), "sweepCost")
        self.run_button = named(QPushButton("Run sweep"), "sweepRun")
        self.estimate_button = named(QPushButton("Estimate"), "sweepEstimate")
        self.estimate_button.setToolTip(
            "Every cell estimated to first order from one forward and one backward "
            "(attribution patching): where to look before running the cells")
        self.verify_k = named(QSpinBox(), "sweepVerifyK")
        self.verify_k.setRange(1, 10_000)
        self.verify_k.setValue(8)
        self.verify_k.setToolTip("How many cells to run for real: those whose estimate moves "
                                 "furthest from the baseline")
        self.verify_button = named(QPushButton("Verify top K"), "sweepVerify")
        self.verify_button.setToolTip("Estimate every cell, then run the K with the largest "
                                      "estimated change for real and compare")
        self.cancel_button = named(QPushButton("Cancel"), "sweepCancel")
        self.cancel_button.setEnabled(False)
        self.progress = named(QProgressBar(), "sweepProgress")
        self.progress.setVisible(False)
        # hidden, it keeps its place: Run and Cancel do not jump when a sweep starts
        policy = self.progress.sizePolicy()
        policy.setRetainSizeWhenHidden(True)
        self.progress.setSizePolicy(policy)
        self.note = named(WrapLabel(""), "sweepNote")
        self.plot = SweepPlot()
        self.scatter = EstimateScatter()

        form = QFormLayout()
        form.setFieldGrowthPolicy(QFormLayout.FieldGrowthPolicy.AllNonFixedFieldsGrow)
        form.addRow("Axes", self.axes)
        template = QHBoxLayout()
        template.addWidget(self.template, 1)
        template.addWidget(self.from_editor)
        form.addRow("Template", template)
        form.addRow("Source input", self.source)
        form.addRow("Vectors", self.vectors)
        inputs = QHBoxLayout()
        inputs.addWidget(self.inputs, 1)
        inputs.addWidget(self.inputs_button)
        form.addRow("Inputs", inputs)
        form.addRow("Metric", self.metric_box)
        form.addRow(self.tokens_label, self.tokens)   # last: it can take three rows
        buttons = QHBoxLayout()
        buttons.addWidget(self.run_button)
        buttons.addWidget(self.cancel_button)
        buttons.addWidget(self.progress, 1)
        estimates = QHBoxLayout()
        estimates.addWidget(self.estimate_button)
        estimates.addWidget(self.verify_button)
        estimates.addWidget(QLabel("K"))
        estimates.addWidget(self.verify_k)
        estimates.addStretch(1)
        top = self._fields = QWidget()
        top_lay = QVBoxLayout(top)
        top_lay.setContentsMargins(0, 0, 0, 0)
        top_lay.addLayout(form)
        top_lay.addStretch(1)
        # a short dock scrolls the fields rather than squeezing them over each other
        scroll = self._fields_scroll = named(QScrollArea(), "sweepFields")
        scroll.setWidget(top)
        scroll.setWidgetResizable(True)
        scroll.setFrameShape(QFrame.Shape.NoFrame)
        scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        # what to read before and while running, and Run itself, stay in sight
        left = QWidget()
        left_lay = QVBoxLayout(left)
        left_lay.setContentsMargins(0, 0, 0, 0)
        left_lay.addWidget(scroll, 1)
        left_lay.addWidget(self.estimate)
        left_lay.addLayout(buttons)
        left_lay.addLayout(estimates)
        left_lay.addWidget(self.note)
        # side by side in a wide dock, stacked in a narrow one
        self.split = named(QSplitter(Qt.Orientation.Horizontal), "sweepSplit")
        self.split.addWidget(left)
        # the grid, and beside it, under it or in a tab of its own (once cells are
        # verified) estimate against actual
        self.plot_area = SweepPlotArea(self.plot, self.scatter)
        self.plots = self.plot_area.split
        self.split.addWidget(self.plot_area)
        self.split.setStretchFactor(0, 1)
        self.split.setStretchFactor(1, 2)
        self.split.setChildrenCollapsible(False)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(4, 4, 4, 4)
        lay.addWidget(self.split)
        self.set_tokens(None)

        self._debounce = QTimer(self, singleShot=True, interval=250)
        self._debounce.timeout.connect(self.fieldsChanged.emit)
        for edit in (self.axes, self.template, self.source, self.vectors, self.inputs):
            edit.textChanged.connect(lambda _t: self._debounce.start())
        self.metric_box.changed.connect(self._debounce.start)
        self.axes.textChanged.connect(self._show_picked)
        self.tokens.positionsChanged.connect(self._on_positions)
        self.run_button.clicked.connect(self._run)
        self.estimate_button.clicked.connect(lambda: self._estimate(0))
        self.verify_button.clicked.connect(lambda: self._estimate(self.verify_k.value()))
        # Enter runs, as Run sweep does
        for edit in (self.axes, self.template, self.source, self.vectors, self.inputs):
            edit.returnPressed.connect(self._run_if_idle)
        self.cancel_button.clicked.connect(self.cancelRequested.emit)
        self.from_editor.clicked.connect(self.templateRequested.emit)
        self.inputs_button.clicked.connect(self.inputsRequested.emit)
        self.plot.cellChosen.connect(self.cellChosen.emit)
        self._started = 0.0

    def resizeEvent(self, event) -> None:  # noqa: N802 - Qt override
        super().resizeEvent(event)
        wide = self.width() >= 600   # the analysis tab of a 1000 px window is ~640 px wide
        orientation = Qt.Orientation.Horizontal if wide else Qt.Orientation.Vertical
        if orientation != self.split.orientation() or not self._split_set:
            self.split.setOrientation(orientation)
            # the plot gets the larger share; the fields keep what they need to be read
            size = self.width() if wide else self.height()
            self.split.setSizes([int(size * 0.42), size - int(size * 0.42)])
            self._split_set = True

    _split_set = False

    def wanted_height(self) -> int:
        """The height that shows every field, the estimate, Run and the note unscrolled."""
        width = max(self._fields_scroll.width(), 200)
        labels = sum(label.heightForWidth(width) for label in (self.estimate, self.note)
                      if label.text())
        fields = self._fields.layout()
        assert fields is not None
        tall = (fields.heightForWidth(self._fields_scroll.viewport().width())
                if fields.hasHeightForWidth() else fields.sizeHint().height())
        return max(tall, fields.minimumSize().height()) + labels + self.run_button.sizeHint().height() + 32

    @property
    def result(self) -> SweepResult | None:
        return self.plot.result

    # -- fields ----------------------------------------------------------------------
    def set_axis(self, name: str, values: str | None) -> None:
        """Set axis ``name`` in the axes line (``None``: remove it); the others stay."""
        self.axes.setText(with_axis(self.axes.text(), name, values))

    def set_tokens(self, tokens: list[str] | None) -> None:
        """The input's tokens to pick positions from (``None``: not a token input)."""
        self.tokens.set_tokens(tokens)
        for w in (self.tokens, self.tokens_label):
            w.setVisible(bool(tokens))
        self._show_picked()

    def _on_positions(self, picked: list[int]) -> None:
        self.set_axis(POSITION_AXIS, ",".join(map(str, picked)) if picked else "all")

    def _show_picked(self) -> None:
        """The strip shows the positions the axes line names (a list of them)."""
        value = dict(axis_pairs(self.axes.text())).get(POSITION_AXIS, "")
        try:
            picked = [int(p) for p in value.split(",") if p.strip()] if value != "all" else []
        except ValueError:
            return
        n = self.tokens.count()
        self.tokens.set_positions([p % n for p in picked if -n <= p < n] if n else [])

    def _run_if_idle(self) -> None:
        if self.run_button.isEnabled():
            self._run()

    def _run(self) -> None:
        self.plot.metric_names[self.metric_box.text().strip()] = self.metric_box.shown_text()
        self.runRequested.emit(self.axes.text(), self.template.text(), self.source.text(),
                               self.metric_box.text())

    def _estimate(self, verify: int) -> None:
        self.plot.metric_names[self.metric_box.text().strip()] = self.metric_box.shown_text()
        self.estimateRequested.emit(self.axes.text(), self.template.text(), self.source.text(),
                                    self.metric_box.text(), verify)

    # -- running -------------------------------------------------------------------------
    def show_estimate(self, text: str, ok: bool = True) -> None:
        """Before a run: the number of runs and what they will cost (or why they cannot run)."""
        self.estimate.setText(text)
        self.estimate.setStyleSheet("" if ok else "color: #a94442;")

    def set_running(self, total: int | None) -> None:
        """Running with ``total`` cells (``None``: stopped)."""
        running = total is not None
        for button in (self.run_button, self.estimate_button, self.verify_button):
            button.setEnabled(not running)
        self.cancel_button.setEnabled(running)
        self.progress.setVisible(running)
        if running:
            self._started = time.monotonic()
            self.progress.setRange(0, max(1, total or 1))
            self.progress.setValue(0)
            self.progress.setFormat("starting…")
            self.note.setText(f"{total} runs" if total else "starting")

    def set_progress(self, done: int, total: int) -> None:
        """``done`` of ``total`` cells; the ETA from the pace so far."""
        self.progress.setRange(0, max(1, total))
        self.progress.setValue(done)
        elapsed = time.monotonic() - self._started
        eta = elapsed / done * (total - done) if done else math.inf
        self.progress.setFormat(f"{done} / {total} · ETA {seconds(eta)}")
        self.note.setText(f"running: {done} of {total} runs")

    def show_partial(self, result: SweepResult) -> None:
        """The grid so far (cells not run yet are NaN)."""
        self.plot.show_result(result)
        self._show_verified(result)

    def _show_verified(self, result: SweepResult | None) -> None:
        verified = result.verified if result is not None else None
        hidden = self.scatter.isHidden()
        self.scatter.show_verified(verified, self.plot.metric_name(result) if result else "")
        self.plot_area.scatter_changed(hidden)

    def show_result(self, result: SweepResult | None) -> None:
        self.set_running(None)
        self.plot.show_result(result)
        self._show_verified(result)
        if result is not None and result.estimates is not None:
            self.progress.setVisible(False)
            total = result.timings_ms.get("total", 0) / 1e3
            forwards = sum(result.forwards.values())
            n = len((result.verified or {}).get("cells") or [])
            if n:
                self.note.setText(f"{result.cells} cells estimated; the {n} with the largest "
                                  f"estimated change run for real (outlined), {seconds(total)}, "
                                  f"{forwards} forwards: {rho_text(result.verified)} "
                                  "(Spearman, estimate against actual).")
            else:
                self.note.setText(f"{result.cells} cells estimated to first order in "
                                  f"{seconds(total)} ({forwards} forwards and one backward). "
                                  "Verify top K runs the cells the estimate ranks first.")
        elif result is not None:
            # the last cell's progress may come after the result (another queue): all ran
            runs = result.cells * (len(result.per_input) if result.per_input is not None else 1)
            self.progress.setRange(0, max(1, runs))
            self.progress.setValue(runs)
            total = result.timings_ms.get("total", 0) / 1e3
            forwards = sum(result.forwards.values())
            if result.per_input is not None:
                n = len(result.per_input)
                self.note.setText(f"{result.cells} cells on each of {n} inputs, {result.cells * n} "
                                  f"runs in {seconds(total)} ({forwards} forwards): each cell is "
                                  "the mean over the inputs; hover one for its spread, click it "
                                  "to show its run on the window's input.")
            else:
                self.note.setText(f"{result.cells} runs in {seconds(total)} ({forwards} "
                                  "forwards). Click a cell to show its run in the main view.")

    def show_note(self, text: str) -> None:
        self.set_running(None)
        self.note.setText(text)
