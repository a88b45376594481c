"""View → Sweep: a dock that runs a sweep on the window's model and input through the
session's runner (off the GUI thread) and draws its grid as the cells arrive.

Axes come from the layer tree's menu ("Sweep over these layers") and the dock's token strip,
the template from the Intervention panel ("From editor"), the metric from a list with tokens
picked from the model's predictions. Before a run the dock states the runs, time and memory
(:mod:`.sweep_estimate`); while it runs, progress with an ETA and the grid so far come from
the runner's thread through queued signals (at most ~20 grids a second); Cancel keeps the
grid so far. Clicking a cell makes its plan the window's and runs it: the main view's
panels show that cell's before and after. Estimate runs the same request estimated to
first order (every cell at once), Verify top K with its K most changed cells run for real.

With an input set in the Inputs field (a file or folder, as File → Open inputs… and
``hookscope sweep --inputs`` read), every cell runs on every input in the runner and shows
the mean with its spread: the request is the one :meth:`Session.sweep` makes with
``inputs=``, its inputs read as the model takes them on the runner's thread.
"""

from __future__ import annotations

import dataclasses
import math
import time
from typing import TYPE_CHECKING, Any

import numpy as np
from PySide6.QtCore import QObject, Signal

from hookscope.core import HookscopeError, PlanError, RunResult
from hookscope.core.analyses import SweepRequest, SweepResult
from hookscope.core.session import ViewFailed
from hookscope.core.views import describe_outputs, input_token_strings
from hookscope.widgets.sweep_fields import axis_pairs
from hookscope.widgets.sweep_view import SweepView
from hookscope.widgets.token_strip import shown_token

from .sweep_estimate import estimate
from .sweep_input_set import SetSize, input_set
from .sweep_text import cell_binder, pairs, source_binder, template_from, vector_specs
from .analysis_docks import analysis_dock, show_dock
from .input_set_dialog import input_set_dialog, set_of

if TYPE_CHECKING:
    from .main_window import MainWindow

PARTIAL_EVERY_S = 0.05


class _Relay(QObject):
    """One sweep's calls from the runner's thread, carried to the GUI thread."""

    progressed = Signal(int, int)
    grew = Signal(object)   # the grid so far (a SweepResult)

    def __init__(self, parent: QObject) -> None:
        super().__init__(parent)
        self.active = True
        self.latest: SweepResult | None = None
        self.done = (0, 0)
        self._last = 0.0

    def progress(self, done: int, total: int) -> None:   # runner thread
        self.done = (done, total)
        self.progressed.emit(done, total)

    def partial(self, result: SweepResult) -> None:   # runner thread
        self.latest = result
        now = time.monotonic()
        if now - self._last >= PARTIAL_EVERY_S:
            self._last = now
            self.grew.emit(result)


class SweepTool(QObject):
    """The dock's answers to its signals, and the sweep in flight (at most one); a child of
    the window (object name ``sweepTool``)."""

    def __init__(self, win: "MainWindow", view: SweepView) -> None:
        super().__init__(win)
        self.setObjectName("sweepTool")
        self.win = win
        self.view = view
        self.relay: _Relay | None = None
        self.pace: dict[str, float] = {}   # model spec -> ms a run took in its last sweep
        self._proposed = view.axes.text()   # the axes the dock proposed (not the person's)
        self._paint_tree = False   # the sweep in flight answers the tree's "Estimate effects"
        self.set_size = SetSize()   # the Inputs field's set size, for the cost line

    # -- before a run --------------------------------------------------------------
    def default_axes(self) -> None:
        """A new model: the axes the dock proposes run over its own blocks
        (``transformer.h.*`` for a GPT-2), unless the person typed axes of their own."""
        tree = self.win.session.tree
        pattern = tree.blocks_pattern() if tree is not None else None
        if self.view.axes.text() != self._proposed or pattern is None:
            return
        self._proposed = f"layer={pattern}; pos=all"
        self.view.axes.setText(self._proposed)

    def refresh_estimate(self) -> None:
        v = self.view
        lm = self.win.session.model
        n = self.set_size(v.inputs.text())
        if isinstance(n, str):
            v.show_estimate(n, False)
            return
        try:
            bind = (cell_binder(v.source.text(), vector_specs(v.vectors.text()), lm, compute=False)
                    if lm is not None else source_binder(v.source.text()))
        except PlanError as exc:
            v.show_estimate(str(exc), False)
            return
        text, ok = estimate(self.win, v.axes.text(), v.template.text(), v.metric_box.text(),
                            bind, self.pace.get(lm.spec) if lm is not None else None, n)
        v.show_estimate(text, ok)

    def browse_inputs(self) -> None:
        """Browse… beside Inputs: the set picked (an image: its folder) fills the field."""
        input_set_dialog(self.win, "sweepInputsDialog",
                         lambda path: self.view.inputs.setText(str(set_of(path))))

    def on_result(self, result: object) -> None:
        """A run arrived: its tokens to pick, its predictions to name, its sweep if any."""
        if not isinstance(result, RunResult):
            return
        lm = self.win.session.model
        meaning = lm.meaning if lm is not None else None
        self.view.set_tokens(input_token_strings(result.inputs, meaning))
        self.view.metric_box.set_choices(predictions(result, meaning))
        got = result.extras.get("sweep")
        paint = self._paint_tree and isinstance(got, (SweepResult, ViewFailed))
        if isinstance(got, (SweepResult, ViewFailed)):
            self._paint_tree = False
        if isinstance(got, SweepResult):
            self._finish()
            self.view.show_result(got)
            if paint and got.estimates is not None:
                self.win.tree.model.set_effects(layer_effects(got),
                                                self.view.plot.metric_name(got))
            # a cell's share of the whole sweep: batched cells share a forward, so the
            # pace of one (batched) forward times the cells would be far too slow (an
            # estimated sweep ran few cells: its time says nothing of a cell's)
            if lm is not None and got.cells and got.estimates is None:
                runs = got.cells * (len(got.per_input) if got.per_input is not None else 1)
                self.pace[lm.spec] = got.timings_ms.get("total", 0.0) / runs
        elif isinstance(got, ViewFailed):
            self._finish()
            self.view.show_note(got.message)
            self.win.show_error(got.message)
        self.refresh_estimate()

    def from_editor(self) -> None:
        panel = self.win.intervention_panel
        try:
            template, source = template_from(panel.path(), panel.value(), self.view.axes.text())
        except HookscopeError as exc:
            self.win.show_error(str(exc))
            return
        self.view.template.setText(template)
        if source is not None:
            self.view.source.setText(source)

    def sweep_layers(self, layers: str, add: bool = False) -> None:
        """The tree's "Sweep over these layers" (``add``: one more layer on the axis): the
        layer axis set, the dock shown."""
        if add:
            had = dict(axis_pairs(self.view.axes.text())).get("layer", "")
            names = [p.strip() for p in had.split(",") if p.strip()]
            layers = ",".join(dict.fromkeys([*names, layers]))
        self.view.set_axis("layer", layers)
        if "{layer}" not in self.view.template.text():
            self.view.template.setText("{layer}=zero")
        show_dock(self.win, self.win.sweep_dock)
        self.win.sweep_dock.raise_()

    def estimate_effects(self, layers: str) -> None:
        """The tree's "Estimate effects": the dock's sweep over ``layers`` estimated to first
        order, and the tree painted by each layer's largest estimated change."""
        self.sweep_layers(layers)
        v = self.view
        self.start(v.axes.text(), v.template.text(), v.source.text(), v.metric_box.text(),
                   estimate=True)
        self._paint_tree = self.relay is not None

    # -- running -------------------------------------------------------------------
    def start(self, axes: str, template: str, source: str, metric: str,
              estimate: bool = False, verify: int = 0) -> None:
        """Run the sweep the fields describe (``estimate``: every cell estimated to first
        order, and the ``verify`` cells the estimate ranks first run for real)."""
        win = self.win
        self._paint_tree = False
        if win.session.model is None:
            win.show_error("open a model first, then run a sweep on it")
            return
        try:
            over = pairs(axes, "axes")
            intervene = pairs(template, "template")
            bind = cell_binder(source, vector_specs(self.view.vectors.text()), win.session.model)
            inputs = input_set(self.view.inputs.text(), win.session)
        except HookscopeError as exc:
            win.show_error(str(exc))
            return
        self._finish()
        relay = self.relay = _Relay(win)
        relay.progressed.connect(lambda d, t: self._progressed(relay, d, t))
        relay.grew.connect(lambda r: self._grew(relay, r))
        # over an input set the grid comes whole, when every input has run (progress counts
        # the runs: cells × inputs)
        request = SweepRequest(over, intervene, metric.strip(), progress=relay.progress,
                               bind=bind, partial=relay.partial if inputs is None else None,
                               estimate=estimate, verify=verify,
                               input_set=inputs[0] if inputs else None,
                               input_names=inputs[1] if inputs else None)
        self.view.set_running(0)
        self.view.plot.show_result(None)
        self.view.scatter.show_verified(None)
        if win.session.submit_run(extra=(request,)) is None:
            self._finish()
            self.view.show_note("a model is still loading: run the sweep once it is open")

    def _progressed(self, relay: "_Relay", done: int, total: int) -> None:
        if relay.active:   # a finished or replaced sweep's late reports are dropped
            self.view.set_progress(done, total)

    def _grew(self, relay: "_Relay", result: SweepResult) -> None:
        if relay.active:
            self.view.show_partial(result)

    def _finish(self) -> None:
        if self.relay is not None:
            self.relay.active = False
            self.relay = None

    def cancel(self) -> None:
        relay = self.relay
        self.win.session.cancel()
        self._finish()
        if relay is not None and relay.latest is not None:
            self.view.show_partial(relay.latest)
            done, total = int((relay.latest.values == relay.latest.values).sum()), relay.done[1]
            self.view.show_note(f"cancelled after {done} of {total} runs: the grid shows "
                                "those; click one to show its run")
        else:
            self.view.show_note("cancelled")

    def on_idle(self) -> None:
        """Nothing in flight, yet the sweep never answered: the window's Cancel stopped it, a
        newer run replaced it, or its run failed (the banner says so). Keep what ran."""
        relay = self.relay
        if relay is None:
            return
        self._finish()
        if relay.latest is not None:
            self.view.show_partial(relay.latest)
        done = int((relay.latest.values == relay.latest.values).sum()) if relay.latest else 0
        self.view.show_note(f"the sweep stopped after {done} of {relay.done[1]} runs (cancelled, "
                            "replaced by a newer run, or failed): press Run sweep again")

    def show_cell(self, row: int, col: int) -> None:
        """The cell's plan becomes the window's (undoable), its layers captured, and runs: the
        panels show that cell's before and after."""
        win = self.win
        result = self.view.result
        if result is None:
            return
        names = list(result.axes)
        if len(names) > 2:
            win.show_error("a sweep of more than two axes shows its first two; run a cell "
                           "with SweepResult.run_cell in Python")
            return
        coords = {n: result.coords[n][i] for n, i in zip(names, [row, col])}
        try:
            plan = result.plan_of(**coords)
        except PlanError as exc:
            win.show_error(str(exc))
            return
        current = win.session.current_plan()
        win.session.set_plan(dataclasses.replace(
            plan, capture=tuple(dict.fromkeys([*current.capture, *plan.capture])),
            keep_tensors=current.keep_tensors))
        first = next(iter(plan.interventions), None)
        if first is not None:
            win.tree.select_path(first)
        win.request_run()


def predictions(result: RunResult, meaning: Any) -> list[tuple[str, str]]:
    """The baseline's top predictions as ``(shown, '#ID')`` for the metric's token boxes."""
    if meaning is None:
        return []
    shown = result.display   # made on the runner's thread: the GUI thread describes nothing
    desc = shown.description if shown is not None else None
    if desc is None:
        try:
            desc = describe_outputs(result.output_without, result.output_without, meaning,
                                    result.inputs, top_k=10)
        except (HookscopeError, RuntimeError, ValueError, TypeError):
            return []
    top: list[dict] = []
    if desc.get("positions"):
        top = desc["positions"][-1]["top_without"]
    elif desc.get("rows"):
        top = desc["rows"][0]["top_without"]
    return [(f"{shown_token(str(t['label']))}  #{t['index']} p={t['prob']:.2f}", f"#{t['index']}")
            for t in top]


def layer_effects(result: SweepResult) -> dict[str, float]:
    """Each layer of an estimated sweep's ``layer`` axis (the first axis if it has none) ->
    its largest estimated change from the baseline over the other axes."""
    assert result.estimates is not None
    names = list(result.axes)
    axis = names.index("layer") if "layer" in names else 0
    base = result.baseline if result.baseline is not None else 0.0
    change = np.abs(np.moveaxis(result.estimates, axis, 0) - base)
    change = change.reshape(change.shape[0], -1)
    return {str(layer): float(np.nanmax(row)) if np.isfinite(row).any() else math.nan
            for layer, row in zip(result.coords[names[axis]], change)}


def install_sweep_tool(win: "MainWindow") -> None:
    """Add View → Sweep and its dock (hidden until asked for) to ``win``."""
    view = SweepView()
    win.sweep_view = view
    win.sweep_dock = analysis_dock(win, "Sweep", "sweepDock", view, "actionViewSweep",
                                   wanted_height=view.wanted_height)
    tool = SweepTool(win, view)
    view.runRequested.connect(tool.start)
    view.estimateRequested.connect(
        lambda axes, template, source, metric, verify: tool.start(
            axes, template, source, metric, estimate=True, verify=verify))
    view.cancelRequested.connect(tool.cancel)
    view.cellChosen.connect(tool.show_cell)
    view.fieldsChanged.connect(tool.refresh_estimate)
    view.templateRequested.connect(tool.from_editor)
    view.inputsRequested.connect(tool.browse_inputs)
    win.tree.sweepRequested.connect(tool.sweep_layers)
    win.tree.effectsRequested.connect(tool.estimate_effects)
    win.resultShown.connect(tool.on_result)
    win.idle.connect(tool.on_idle)
    win.modelLoaded.connect(lambda _spec: tool.default_axes())
