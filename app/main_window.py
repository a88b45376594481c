"""The main window: layer tree (left), activations (centre), before/after (right).

This file builds and wires. The :class:`~hookscope.core.Session` (held by
the worker relay, :mod:`.worker`) owns the model, input, device, plan and
options; every widget writes its edits to the session and redraws from the
session's events, which all arrive on the GUI thread at one place, the
window's :class:`~.session_reactions.SessionReactions`. Nothing here calls
into a torch module.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Callable

from PySide6.QtCore import Signal
from PySide6.QtGui import QCloseEvent
from PySide6.QtWidgets import QMainWindow

from hookscope.core import LoadedModel, Plan, RunResult
from hookscope.core.model import CodeTrust, names_code
from hookscope.widgets.view_worker import ViewWorker

from . import export_actions as files
from . import window_chrome as chrome
from .demo_setup import default_plan
from .menus import Handlers, build_menus
from .open_dialog import ask_and_load
from .recent import RecentModels
from .session_reactions import SessionReactions
from .trust_dialog import TrustGate
from .intervention_dock import install_intervention_dock
from .layout import arrange_docks
from .window_layout import build_parts
from .lm_tools import install_lm_tools
from .sweep_tool import install_sweep_tool
from .scan_tool import install_scan_tool
from .compare_tool import install_compare_tool
from .window_tools import install_window_tools
from .vector_dialog import install_steer_dialog
from .worker import ForwardWorker

if TYPE_CHECKING:
    from PySide6.QtWidgets import QDockWidget

    from hookscope.widgets.hooks_view import HooksView
    from hookscope.widgets.generation_view import GenerationView
    from hookscope.widgets.lens_view import LensView
    from hookscope.widgets.sweep_view import SweepView

    from .analysis_docks import AnalysisDock
    from .scan_tool import ScanTool
    from .compare_tool import CompareTool
    from hookscope.widgets.sae_view import SaeView
    from hookscope.widgets.intervention_panel import InterventionPanel


class MainWindow(QMainWindow):
    """Hookscope's window. Scripting API: :attr:`session`, :meth:`load`, :meth:`request_run`,
    :meth:`set_live`, :attr:`last_result`, :attr:`worker`, :meth:`error_text`.

    Signals: ``modelLoaded(str)`` (spec), ``resultShown(object)`` (RunResult), ``errorShown(str)``,
    ``idle()`` (nothing in flight or waiting any more), ``windowClosed()``.
    """

    modelLoaded = Signal(str)
    resultShown = Signal(object)
    errorShown = Signal(str)
    idle = Signal()
    windowClosed = Signal()

    # Set from outside __init__ (annotations only: no class attribute at run time).
    hooks_view: HooksView        # window_tools.install_window_tools
    hooks_dock: QDockWidget      # window_tools.install_window_tools
    lens_view: LensView          # lm_tools.install_lm_tools
    lens_dock: AnalysisDock      # lm_tools.install_lm_tools
    sae_view: SaeView            # lm_tools.install_sae_tools
    sae_dock: AnalysisDock       # lm_tools.install_sae_tools
    generation_view: GenerationView  # lm_tools.install_generation
    generation_dock: AnalysisDock    # lm_tools.install_generation
    intervention_panel: InterventionPanel  # intervention_dock.install_intervention_dock
    intervention_dock: QDockWidget         # intervention_dock.install_intervention_dock
    sweep_view: SweepView        # sweep_tool.install_sweep_tool
    sweep_dock: AnalysisDock     # sweep_tool.install_sweep_tool
    scan_tool: ScanTool          # scan_tool.install_scan_tool
    compare_tool: CompareTool    # compare_tool.install_compare_tool
    _dock_mode: str              # layout.arrange_docks, once it has placed the docks
    startup_errors: list[str]    # launch: the command line's mistakes, shown sticky

    def __init__(self, recent: RecentModels | None = None, stats_only: bool = False,
                 runner_factory: Callable | None = None) -> None:
        super().__init__()
        self.setObjectName("mainWindow")
        self.setWindowTitle("Hookscope")
        self.setAcceptDrops(True)
        self.recent = recent or RecentModels()
        self.remember_layout = True  # geometry and docks saved at close (QSettings)
        self._sized = False
        # runner_factory: a Ray or accelerate runner (hookscope SPEC --ray/--device-map);
        # the window cannot tell it from the local one.
        self.worker = ForwardWorker(self, runner_factory) if runner_factory else ForwardWorker(self)
        self.session = self.worker.session
        self.session.set_options(stats_only=stats_only)
        self.ui = files.ActionUi(self, self.show_error, lambda m: self.statusBar().showMessage(m, 5000))
        # a session, recent entry or dropped file whose model runs code is asked about first
        self.trust_gate = TrustGate(self, self.show_error, lambda m: self.statusBar().showMessage(m, 8000))
        p = build_parts(self, self.session)
        (self.run_bar, self.run_toolbar, self.tree, self.layer_dock, self.outputs, self.output_dock,
         self.banner, self.note, self.panel, self.status) = (
            p.run_bar, p.run_toolbar, p.tree, p.layer_dock, p.outputs, p.output_dock, p.banner,
            p.note, p.panel, p.status)
        s = self.session
        # The panels' pictures a result did not bring ready (a view switched, a resize, a
        # zoom) are made in this one thread; each run asks the panels what they show.
        self.view_worker = ViewWorker(self)
        self.panel.view_worker = self.view_worker
        s.shape_views = self.panel.shape_views
        self.actions_ = build_menus(self, Handlers(
            open_model=lambda: ask_and_load(self),
            open_demo=lambda n: self.load(f"demo:{n}", plan=default_plan(f"demo:{n}")),
            fill_recent=lambda menu: chrome.fill_recent_menu(menu, self.recent, self.open_recent),
            open_session=lambda: self.open_session(), save_session=lambda: self.save_session(),
            export_captures=lambda: files.export_captures(s, self.ui),
            export_script=lambda: files.export_script(s, self.ui, gate=self.worker.gate),
            quit=self.close, undo=s.undo, redo=s.redo, run=self.request_run,
            set_live=self.set_live, cancel=s.cancel,
            set_stats_only=lambda on: s.set_options(stats_only=bool(on)),
            set_device=self.run_bar.set_device, about=lambda: chrome.show_about(self)),
            self.run_bar.devices,
            [self.layer_dock.toggleViewAction(), self.output_dock.toggleViewAction(),
             self.run_toolbar.toggleViewAction()])
        self.reactions = SessionReactions(self)   # how the parts follow the session's events
        self._wire()
        install_intervention_dock(self)   # the selected layer's intervention in full
        install_window_tools(self)   # readouts, File → Export figure, View → Hooks
        install_lm_tools(self)       # View → Logit lens, View → Generation, File → Attach SAE
        install_sweep_tool(self)     # View → Sweep
        install_scan_tool(self)      # File → Open inputs, View → Scan
        install_compare_tool(self)   # File → Compare with…, View → Divergence
        install_steer_dialog(self)   # the tree's Steer… on a layer
        # after every dock exists: the user's layout names the analysis docks too
        self._restored = chrome.restore_layout(self)

    def _wire(self) -> None:
        s = self.session
        s.subscribe(self.reactions._on_event)
        self.view_worker.drained.connect(self.reactions.settle)
        self.run_bar.runRequested.connect(self.request_run)
        self.run_bar.liveToggled.connect(self.set_live)
        self.run_bar.deviceChanged.connect(self.ui.guarded(s.set_device))
        self.run_bar.cancelRequested.connect(s.cancel)
        self.tree.model.errorOccurred.connect(self.show_error)
        self.tree.layerSelected.connect(self.panel.select)
        self.tree.layerSelected.connect(lambda p: s.view.__setitem__("selected", p))
        self.reactions._show_options()
        self.reactions._show_undo()

    # -- scripting API -----------------------------------------------------------
    @property
    def loaded(self) -> LoadedModel | None:
        return self.session.model

    @property
    def last_result(self) -> RunResult | None:
        return self.session.last_result

    @property
    def stats_only(self) -> bool:
        return self.session.options.stats_only

    def load(self, spec: str, weights: str | None = None, input_text: str | None = None,
             plan: Plan | None = None, trust_pickle: bool = False,
             labels: str | None = None, trust: CodeTrust | None = None) -> int:
        """Load a model; when it arrives, apply ``plan`` (and the class names in the
        ``labels`` file) and run once. A failed load leaves the current model, plan
        and plots as they were. ``trust``: for a spec read from a file, which code it
        may run (:mod:`hookscope.core.model.code_trust`); ``None`` for a typed spec."""
        future = self.session.open_model(spec, weights, trust_pickle=trust_pickle, plan=plan,
                                         input_text=input_text, labels=labels, trust=trust)
        self.status.show_busy(True)
        return future.request_id

    def open_recent(self, spec: str, weights: str | None = None) -> int | None:
        """Open a recent-files entry: data, so code it names runs only after a yes."""
        return self.trust_gate.open(lambda trust: self.load(spec, weights, trust=trust),
                                    asked_by=f"the recent-files entry {spec}")

    def request_run(self) -> int | None:
        """Queue a comparison with the current plan, input and device; returns the request id."""
        s = self.session
        if s.model is None and not s.busy:
            self.show_error("no model is open: use File → Open model…")
            return None
        self.status.show_busy(True)
        if s.set_input(self.run_bar.input_text()) and s.options.live and s.model is not None:
            return s.newest_run  # the new input has queued its run already
        future = s.submit_run()
        return future.request_id if future is not None else None

    def set_live(self, on: bool) -> None:
        """Live mode: every plan change (and every step of a drag) re-runs."""
        if on:
            self.session.set_input(self.run_bar.input_text())
        self.session.set_options(live=bool(on))

    def is_live(self) -> bool:
        return self.session.options.live

    def refuse_output(self, what: str, path: str | Path) -> None:
        """Refuse (a HookscopeError) writing ``path`` over a file the open session reads: a
        plot's own export asks here (:mod:`hookscope.widgets.output_guard`)."""
        files.files_the_session_reads(self.session).refuse([(what, path)])

    def error_text(self) -> str:
        """The error the banner shows ("" when it shows none, or an alarm)."""
        return self.banner.error_text()

    def alarm_text(self) -> str:
        """The alarm the banner shows: an intervention that may have done nothing."""
        return self.banner.alarm_text()

    def show_error(self, message: str, sticky: bool = False) -> None:
        """Show ``message`` in the banner (:meth:`~.error_banner.ErrorBanner.show_error`)."""
        self.errorShown.emit(self.banner.show_error(message, sticky))

    def is_idle(self) -> bool:
        """No load or run in flight or queued, and no picture being made (for --screenshot
        and scripts)."""
        return not self.session.busy and not self.view_worker.busy

    def save_session(self, path: str | None = None) -> Path | None:
        return files.save_session(self.session, self.ui, path)

    def open_session(self, path: str | None = None, trust_code: bool = False) -> int | None:
        """Open a session file; a damaged one shows its error and changes nothing.

        The file is data: a model in it that runs code is asked about first, once its
        load (in the runner's thread) has named the code and its hash
        (:class:`~.trust_dialog.TrustGate`), unless ``trust_code`` (``hookscope FILE
        --trust-code``). Returns the load's request id (``None``: nothing was opened)."""
        path = path or files.pick_session(self.ui)
        setup = files.read_session(self.ui, path) if path else None
        if setup is None:
            return None
        return self.trust_gate.open(lambda trust: self.open_setup_with(setup, trust), trust_code,
                                    asked_by=f"the session file {path}")

    def open_setup_with(self, setup, trust: CodeTrust) -> int:
        """Open a checked session setup under ``trust`` (raises what the session raises).
        Its saved scan shows now, unless the model runs code that ``trust`` has no yes for:
        that load will be refused (the question follows), and the window keeps its own."""
        future = self.session.open_setup(setup, trust=trust)
        if trust.everything or trust.files or not names_code(setup.spec):
            self.scan_tool.restore(setup)
        self.status.show_busy(True)
        return future.request_id

    # -- drops, sizes, closing ------------------------------------------------------
    def dragEnterEvent(self, event) -> None:  # noqa: N802 - Qt override
        if chrome.dropped_session(event.mimeData()):
            event.acceptProposedAction()

    def dropEvent(self, event) -> None:  # noqa: N802 - Qt override
        path = chrome.dropped_session(event.mimeData())
        if path:
            event.acceptProposedAction()
            self.open_session(path)

    def showEvent(self, event) -> None:  # noqa: N802 - Qt override
        super().showEvent(event)
        if not self._sized:
            self._sized = True
            if not self._restored:
                arrange_docks(self, force=True)

    def resizeEvent(self, event) -> None:  # noqa: N802 - Qt override
        super().resizeEvent(event)
        if self._sized:  # the docks give way when the window crosses a layout width (app/layout.py)
            arrange_docks(self, force=event.oldSize().width() <= 0 and not self._restored)

    def closeEvent(self, event: QCloseEvent) -> None:  # noqa: N802 - Qt override
        if self.remember_layout:
            chrome.save_layout(self)
        self.hide()  # gone at once for the user; the run in flight stops at its next layer
        self.shutdown()
        super().closeEvent(event)
        self.windowClosed.emit()

    def shutdown(self) -> None:
        """Stop delivering answers and stop the forward in flight at its next layer; idempotent."""
        self.worker.shutdown()
        self.view_worker.shutdown()
