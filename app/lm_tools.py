"""The window's language-model views, attached in one call: View → Logit lens, a
dock (hidden until asked for, so the default layout is unchanged) with the
lens grid of each run.

While the dock is shown, the session computes the lens with every run (in the
runner's thread, like the run itself; ``Session.set_derived``); hidden, it
costs nothing. A model whose final norm and unembedding are not recognised gets
a sentence in the dock, not a failed run.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from PySide6.QtGui import QAction

from hookscope.core import HookscopeError, RunResult
from hookscope.core.session import ViewFailed
from hookscope.core.analyses import (GenerateRequest, Generation, LensRequest, LensResult, SaeReport,
                                     SaeRequest, find_lens_head, target_id)
from hookscope.widgets.generation_view import GenerationView
from hookscope.widgets.lens_view import LensView
from hookscope.widgets.sae_view import SaeView

from .analysis_docks import analysis_dock, fit_dock, show_dock
from .attention_tool import install_attention_tool
from .window_tools import insert_file_action

if TYPE_CHECKING:
    from .main_window import MainWindow


def install_lm_tools(win: "MainWindow") -> None:
    """Add View → Logit lens, View → Generation, View → Attention, File → Attach SAE and
    their docks to ``win``."""
    install_sae_tools(win)
    install_generation(win)
    install_attention_tool(win)
    win.lens_view = LensView()
    dock = analysis_dock(win, "Logit lens", "lensDock", win.lens_view, "actionViewLens",
                         wanted_height=win.lens_view.wanted_height)
    win.lens_dock = dock
    # before the lens asks: a session file's views shown with its settings
    win.modelLoaded.connect(lambda _spec: show_saved_views(win))
    dock.visibilityChanged.connect(lambda _shown: ask_for_lens(win))
    win.lens_view.tokenChanged.connect(lambda _t: ask_for_lens(win))
    win.modelLoaded.connect(lambda _spec: ask_for_lens(win, run=False))
    win.resultShown.connect(lambda result: show_views(win, result))


def install_sae_tools(win: "MainWindow") -> None:
    win.sae_view = SaeView()
    dock = analysis_dock(win, "SAE features", "saeDock", win.sae_view, "actionViewSae")
    win.sae_dock = dock
    attach = QAction("Attach &SAE…", win)
    attach.setObjectName("actionAttachSae")
    attach.setStatusTip("Attach a sparse autoencoder (SAELens folder) to the selected layer")
    attach.triggered.connect(lambda: attach_sae_dialog(win))
    insert_file_action(win, attach, "actionExportFigure")
    win.addAction(attach)
    win.modelLoaded.connect(lambda _spec: forget_saes(win))


def install_generation(win: "MainWindow") -> None:
    win.generation_view = GenerationView()
    dock = analysis_dock(win, "Generation", "generationDock", win.generation_view, "actionViewGeneration")
    win.generation_dock = dock
    # Hidden, runs stop generating; shown again, the next Generate asks anew.
    dock.visibilityChanged.connect(
        lambda shown: None if shown else win.session.set_derived("generation", None))
    win.generation_view.generateRequested.connect(
        lambda n, t, seed: ask_for_generation(win, n, t, seed))


def ask_for_generation(win: "MainWindow", n: int, temperature: float, seed: int) -> None:
    """Generate with every run from now on (while the dock is shown), and run now."""
    try:
        request = GenerateRequest(n, temperature, seed)
    except HookscopeError as exc:
        win.show_error(str(exc))
        return
    win.session.set_derived("generation", request)
    if not win.is_live():
        win.request_run()


def forget_saes(win: "MainWindow") -> None:
    """A new model has no SAEs: the view empties and runs stop computing features; one
    opened from a session file has that file's (their view shown when it was open)."""
    if win.session.saes and "sae" in win.session.derived:
        show_dock(win, win.sae_dock)
        return
    win.session.set_derived("sae", None)
    win.sae_view.show_report(None)


def show_saved_views(win: "MainWindow") -> None:
    """The LM views a session file set (:meth:`Session.open_file`): their docks shown with
    the saved settings, so the window asks for what the file asked for. The docks share one
    tab area and a tab behind another computes nothing: a generation is shown in front,
    the lens's tab keeps its settings for when it is brought forward."""
    d = win.session.derived
    gen, lens = d.get("generation"), d.get("lens")
    if isinstance(lens, LensRequest) and not win.lens_dock.isVisible():
        win.lens_view.head.setText(lens.head or "")
        win.lens_view.token.setText("" if lens.target is None else str(lens.target))
        show_dock(win, win.lens_dock)
    if isinstance(gen, GenerateRequest) and not win.generation_dock.isVisible():
        view = win.generation_view
        view.steps.setValue(gen.n)
        view.temperature.setValue(gen.temperature)
        view.seed.setValue(gen.seed)
        show_dock(win, win.generation_dock)
        # showing it switches the tab area, whose visibility changes on the way stop a
        # generation: asked for again once it is in front
        win.session.set_derived("generation", gen)


def attach_sae_dialog(win: "MainWindow", folder: str | None = None) -> bool:
    """File → Attach SAE: the SAE in ``folder`` on the layer selected in the tree; whether
    it was attached. ``None``: ask (:class:`~.sae_dialog.AttachSaeDialog`, a folder or
    ``demo``; it attaches when accepted, so this returns ``False`` at once). Mistakes go to
    the banner."""
    layer = win.tree.selected_path()
    model = win.session.model
    if model is None or not layer:
        win.show_error("select a layer in the tree first, then File → Attach SAE attaches the "
                       "SAE to it")
        return False
    if folder is None:
        from .sae_dialog import AttachSaeDialog

        dialog = AttachSaeDialog(win, layer, demo_model=model.spec == "demo:lm")
        dialog.accepted.connect(lambda: attach_sae_dialog(win, dialog.chosen())
                                if dialog.chosen() else None)
        dialog.finished.connect(lambda _r: dialog.deleteLater())
        dialog.open()
        return False
    try:
        win.session.attach_sae(layer, folder)
    except HookscopeError as exc:
        win.show_error(str(exc))
        return False
    win.session.set_derived("sae", SaeRequest(tuple(win.session.saes)))
    show_dock(win, win.sae_dock)
    win.statusBar().showMessage(f"SAE attached to {layer}", 5000)
    if not win.is_live():
        win.request_run()
    return True


def ask_for_lens(win: "MainWindow", run: bool = True) -> None:
    """Compute the lens with every run while the dock is shown (and run once now)."""
    model = win.session.model
    wanted = win.lens_dock.isVisible() and model is not None
    request = None
    if wanted:
        assert model is not None
        head = win.lens_view.head.text().strip() or None
        try:
            find_lens_head(model.module, head)
        except HookscopeError as exc:
            win.lens_view.show_lens(None)
            win.lens_view.show_note(str(exc))
            wanted = False
        else:
            token = win.lens_view.token.text().strip() or None
            try:
                if token is not None:
                    target_id(token, model.meaning, vocab=1 << 62)
            except HookscopeError as exc:
                win.show_error(str(exc))
                token = None
            request = LensRequest(head=head, target=token)
    before = win.session.derived.get("lens")
    win.session.set_derived("lens", request)
    if run and request is not None and request != before and not win.is_live():
        win.request_run()


def show_views(win: "MainWindow", result: object) -> None:
    """Every derived view a result brings (lens, SAE features, generation) into its dock."""
    extras = result.extras if isinstance(result, RunResult) else {}
    failed = [(name, v.message) for name, v in extras.items() if isinstance(v, ViewFailed)]
    for name, message in failed:
        note = {"lens": win.lens_view.show_note, "sae": win.sae_view.note.setText,
                "generation": win.generation_view.note.setText}.get(name)
        if note is not None:
            note(message)
        win.show_error(message)
    report = extras.get("sae")
    if isinstance(report, SaeReport):
        win.sae_view.show_report(report, report.tokens)
    gen = extras.get("generation")
    if isinstance(gen, Generation):
        win.generation_view.show_generation(gen)
    lens = extras.get("lens")
    if isinstance(lens, LensResult):
        win.lens_view.show_lens(lens)
        fit_lens_dock(win)


def fit_lens_dock(win: "MainWindow") -> None:
    """The analysis tabs as tall as the lens grid needs, when the lens is in front."""
    fit_dock(win, win.lens_dock)
