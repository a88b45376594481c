"""File → Open inputs… and View → Scan: the window's model over an input set, run by the
session's runner (off the GUI thread) with a progress bar, an ETA and Cancel.

The scan captures the unit's layer (and the layers the plan captures) and measures the
plan's interventions over the set. Progress comes from the runner's thread through a
queued signal; the result arrives with the run's (``result.extras["scan"]``).
Double-clicking an input makes it the window's input and runs it.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QObject, Signal
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QFileDialog

from hookscope.core import HookscopeError, PlanError, RunResult
from hookscope.core.base import files_read, refuse_overwrite, write_text
from hookscope.core.analyses import ScanJob, ScanRequest, ScanResult
from hookscope.core.dataset import InputSet, open_inputs

from .export_actions import files_the_session_reads
from hookscope.core.session import SavedScan, SessionSetup, ViewFailed
from hookscope.widgets.scan_view import ScanView

from .analysis_docks import analysis_dock, show_dock
from .input_set_dialog import input_set_dialog, is_image, set_of
from .window_tools import insert_file_action

if TYPE_CHECKING:
    from .main_window import MainWindow

#: the most numbers an input from a batch file may have to be opened in the main view
#: (it becomes the input box's literal)
MAX_LITERAL = 4096


class _Relay(QObject):
    """Carries the runner thread's progress calls to the GUI thread."""

    progressed = Signal(int, int, float)


class ScanTool:
    def __init__(self, win: "MainWindow") -> None:
        self.win = win
        self.inputs: InputSet | None = None
        self.result: ScanResult | None = None
        self.unit_text = ""
        self.view = ScanView()
        self.dock = analysis_dock(win, "Scan", "scanDock", self.view, "actionViewScan")
        self.relay = _Relay(win)
        self.relay.progressed.connect(self.view.set_progress)
        self.view.openRequested.connect(self.open_dialog)
        self.view.runRequested.connect(self.start)
        self.view.cancelRequested.connect(self.cancel)
        self.view.inputChosen.connect(self.show_input)
        self.view.unitChanged.connect(self.show_unit)
        self.view.saveCsvRequested.connect(self.save_csv_dialog)
        win.resultShown.connect(self.show)
        act = QAction("Open &inputs…", win)
        act.setObjectName("actionOpenInputs")
        act.setStatusTip("Open a folder of images, a .txt, .jsonl, .pt or .safetensors input set")
        act.triggered.connect(self.open_dialog)
        insert_file_action(win, act, "actionSaveSession")
        self.action = act

    def open_dialog(self) -> QFileDialog:
        """File → Open inputs: a prompt or batch file, or any image of a folder of images
        (the folder opens, with its class subfolders: :func:`image_set_root`)."""
        return input_set_dialog(self.win, "openInputsDialog", self.open_picked)

    def open_picked(self, path: str) -> bool:
        """A file picked in the dialog: an image stands for its folder of images."""
        if not is_image(path):
            return self.open(Path(path))
        root = set_of(path)
        if not self.open(root):
            return False
        assert self.inputs is not None
        classes = self.inputs.class_names
        self.win.statusBar().showMessage(
            f"opened the folder of images {root}" + (f" ({len(classes)} classes, one a subfolder)"
                                                    if classes else ""), 8000)
        return True

    def open(self, path: str | Path) -> bool:
        """Open the input set at ``path`` (shown in the Scan dock); whether it opened."""
        try:
            self.inputs = open_inputs(str(path))
            self.win.session.read_files.add("the input file", path)  # no export replaces it
        except HookscopeError as exc:
            self.win.show_error(str(exc))
            return False
        self.view.set_inputs(self.inputs.name, len(self.inputs))
        show_dock(self.win, self.dock)
        self.dock.raise_()
        return True

    def _unit(self, text: str) -> tuple[str, int] | None:
        if not text:
            return None
        layer, sep, idx = text.rpartition(":")
        try:
            return (layer.strip(), int(idx)) if sep and layer.strip() else None
        except ValueError:
            return None

    def start(self, unit_text: str) -> None:
        s = self.win.session
        if s.model is None:
            self.win.show_error("open a model first, then scan inputs with it")
            return
        if self.inputs is None:
            self.win.show_error("open an input set first (File → Open inputs…)")
            return
        unit = self._unit(unit_text)
        if unit_text and unit is None:
            self.win.show_error(f"unit {unit_text!r}: write LAYER:INDEX, e.g. conv2:3")
            return
        plan = s.current_plan()
        capture = tuple(dict.fromkeys([*([unit[0]] if unit else []), *plan.capture]))
        try:
            req = ScanRequest(self.inputs, capture, dict(plan.interventions), device=s.device)
        except PlanError as exc:
            self.win.show_error(str(exc))
            return
        self.unit_text = unit_text
        self.view.set_running(req.size())
        job = ScanJob(req, progress=lambda d, t, e: self.relay.progressed.emit(
            d, t, -1.0 if e is None else float(e)))
        if s.submit_run(extra=(job,)) is None:
            self.view.show_note("a model is still loading: run the scan once it is open")

    def save_csv_dialog(self) -> None:
        path, _ = QFileDialog.getSaveFileName(self.win, "Save the per-input effect", "",
                                              "CSV (*.csv)")
        if path:
            self.save_csv(path)

    def save_csv(self, path: str | Path) -> bool:
        """Write the last scan's per-input rows to ``path`` (whole or not at all; never over
        the input set or another file the window reads); whether it was written."""
        if self.result is None:
            self.win.show_error("run a scan first, then save its rows")
            return False
        s = self.win.session
        try:
            reads = files_read(inputs=[self.result.inputs.source],
                               into=files_the_session_reads(s))
            refuse_overwrite([("the CSV", str(path))], reads, "the window")
            write_text(path, self.result.to_csv())
        except HookscopeError as exc:
            self.win.show_error(str(exc))
            return False
        self.win.statusBar().showMessage(f"saved {len(self.result.rows)} rows to {path}", 5000)
        return True

    def cancel(self) -> None:
        self.win.session.cancel()
        self.view.show_note("cancelled")

    def show(self, result: object) -> None:
        extras = result.extras if isinstance(result, RunResult) else {}
        got = extras.get("scan")
        if isinstance(got, ScanResult):
            self.result = got
            self.win.session.saved_scan = SavedScan(got, self.unit_text)  # saved with the session
            self.view.show_result(got, self._tops(got, self.unit_text), self.unit_text)
        elif isinstance(got, ViewFailed):
            self.view.show_note(got.message)
            self.win.show_error(got.message)

    def show_unit(self, unit_text: str) -> None:
        """Another unit's top inputs from the last scan (its layer must have been captured)."""
        if self.result is None:
            return
        self.unit_text = unit_text
        if self.win.session.saved_scan is not None:
            self.win.session.saved_scan.unit = unit_text
        self.view.show_tops(self._tops(self.result, unit_text), unit_text)

    def restore(self, setup: SessionSetup) -> None:
        """Show the scan a session file's sidecar held (no run), or say in the banner why
        it is not shown; a session without one leaves the dock as it is."""
        if setup.scan_note:
            self.win.show_error(f"the session opened without its scan: {setup.scan_note}",
                                sticky=True)  # stays past the run the opened session starts
        saved = setup.scan
        if saved is None:
            return
        self.result, self.unit_text = saved.result, saved.unit
        self.view.unit.setText(saved.unit)
        self.view.set_inputs(saved.result.inputs.name, len(saved.result.inputs))
        self.view.show_result(saved.result, self._tops(saved.result, saved.unit), saved.unit)
        show_dock(self.win, self.dock)
        self.dock.raise_()

    def _tops(self, result: ScanResult, unit_text: str) -> list[tuple[Any, Any]] | None:
        unit = self._unit(unit_text)
        if unit is None:
            return None
        model = self.win.session.model
        # a scan reopened from a session file has no tokenizer of its own: the model's
        codec = result.meaning.codec or (model.meaning.codec if model is not None else None)
        try:
            tops = result.top_inputs(*unit, codec=codec)
        except PlanError as exc:
            self.win.show_error(str(exc))
            return None
        example = model.example_input if model is not None else None
        out = []
        for t in tops:
            pixels = None
            if result.inputs.kind != "text":
                try:
                    pixels = image_of(result.inputs.item(t.index, example))
                except HookscopeError:
                    pixels = None
            out.append((t, pixels))
        if result.inputs.kind != "text" and any(p is None for _, p in out):
            out = [(t, None) for t, _ in out]  # not images: the names as text
        return out

    def show_input(self, index: int) -> None:
        """Input ``index`` of the open set becomes the window's input, and runs."""
        if self.inputs is None:
            return
        try:
            text = input_text_of(self.inputs, index)
        except HookscopeError as exc:
            self.win.show_error(str(exc))
            return
        self.win.session.set_input(text)
        self.win.request_run()


def image_of(x: Any) -> Any:
    """A batch-of-one image tensor (1 x C x H x W, C 1 or 3) as H x W (x 3) numbers."""
    import torch

    if not isinstance(x, torch.Tensor) or x.dim() != 4 or x.shape[1] not in (1, 3):
        raise HookscopeError("not an image")
    a = x[0].detach().float().cpu().numpy()
    return a[0] if a.shape[0] == 1 else a.transpose(1, 2, 0)


def input_text_of(inputs: InputSet, index: int) -> str:
    """The input box's text for input ``index``: the image's path, ``text:`` and the
    prompt, or a literal of a batch file's tensor (up to :data:`MAX_LITERAL` numbers)."""
    import torch

    path = inputs.image_path(index)
    if path is not None:
        return str(path)
    text = inputs.text(index)
    if text is not None:
        return "text:" + text
    x = inputs.item(index)
    if isinstance(x, torch.Tensor) and x.numel() <= MAX_LITERAL:
        return repr(x.tolist())
    raise HookscopeError(f"input {index} of {inputs.name} is not a single tensor of at most "
                         f"{MAX_LITERAL} numbers: save it with torch.save and open it as the "
                         "input instead")


def install_scan_tool(win: "MainWindow") -> ScanTool:
    """Add File → Open inputs… and View → Scan (its dock hidden until asked for) to ``win``."""
    tool = ScanTool(win)
    win.scan_tool = tool
    return tool
