"""``hookscope run ... --save-plots DIR``: the window's plots as files, no window.

Draws the same widgets the window shows (an activation panel per captured
layer call, the output comparison) on Qt's offscreen platform and writes, for
each layer call, a PNG and an SVG of its panel and CSVs of its histogram and
view, then ``output.png``/``.svg`` (the output panel as the window shows it:
its verdict, legend, plot and table, or a detector's boxes on its input),
``output.csv``, ``activations.png``/``.svg`` (every panel and the output in
one figure, as File → Export figure writes it) and, for a detector,
``detections.png`` (its boxes on the input image, without and with). Figures
leave the panels' controls out. Qt is imported here only, when the option is
given, so a plain ``hookscope run`` stays Qt-free and starts fast.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
from pathlib import Path
from typing import Any, Callable, Sequence

from hookscope.core import HookscopeError, RunResult, Session
from hookscope.core.base import DETECTIONS, OutputMeaning, ReadFiles, refuse_overwrite

PANEL_WIDTH = 1000   # px: side by side, each plot ~480 px
OUTPUT_SIZE = (800, 520)   # px: the output panel; a table under the plot gets more height
OUTPUT_TABLE_HEIGHT = 900


#: The longest layer part of a file name (file systems stop at 255 bytes).
STEM_LIMIT = 100


def plot_stem(layer: str) -> str:
    """A file-name stem for ``layer``, unique and the same on every run: the path itself when
    it is made of safe characters only, else the safe characters followed by ``@`` and a hash
    of the whole path (``@`` is not a safe character, so two layers never share a stem:
    ``blocks.a b`` and ``blocks.a_b`` give ``blocks.a_b@…`` and ``blocks.a_b``)."""
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", layer).strip(".")
    if safe == layer and 0 < len(layer) <= STEM_LIMIT:
        return layer
    digest = hashlib.sha256(layer.encode("utf-8", "surrogatepass")).hexdigest()[:12]
    return f"{safe[:STEM_LIMIT] or 'model'}@{digest}"


def plots_folder(folder: str | Path) -> Path:
    """``folder``, created if needed; a HookscopeError if it cannot be."""
    path = Path(folder).expanduser()
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise HookscopeError(f"--save-plots {folder}: cannot create the folder "
                             f"({exc.strerror or exc})") from exc
    return path


def _app():
    """The running QApplication, or a new one on the offscreen platform (a
    headless run opens no window, with or without a display)."""
    if "PySide6.QtWidgets" not in __import__("sys").modules:
        os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    from PySide6.QtWidgets import QApplication

    return QApplication.instance() or QApplication(["hookscope"])


def save_plots(result: RunResult, folder: str | Path, meaning: OutputMeaning | None = None,
               inputs: Any = None, reads: ReadFiles | None = None) -> list[Path]:
    """Write ``result``'s plots into ``folder``; returns the files written. With a detector's
    ``meaning`` and its ``inputs`` also ``detections.png``: the boxes on the input image.
    ``reads``: the files the command reads (:func:`~hookscope.core.base.own_inputs.files_read`),
    which no plot may replace (checked before any file is written)."""
    out = plots_folder(folder)
    app = _app()
    from hookscope.widgets.activation_panel import ActivationPanel
    from hookscope.widgets.output_comparison import OutputComparison

    from .qt_messages import offscreen_notes_dropped

    # The bound lines show the plan the result was run with.
    shown = Session(runner_factory=None)
    if result.plan is not None:
        shown.set_plan(result.plan)
    panel, outputs = ActivationPanel(session=shown), OutputComparison()
    written: list[Path] = []
    with offscreen_notes_dropped():  # stderr stays empty when all is well
        _draw_and_write(app, result, out, panel, outputs, meaning, inputs, reads, written)
    return written


def _figure(widgets: Sequence[Any], title: str, target: Path) -> Path:
    from hookscope.widgets.figure_export import write_figure

    return write_figure(target, widgets, title)


def _draw_and_write(app: Any, result: RunResult, out: Path, panel: Any, outputs: Any,
                    meaning: OutputMeaning | None, inputs: Any,
                    reads: ReadFiles | None, written: list[Path]) -> None:
    from hookscope.widgets.plot_tools import save_png

    try:
        rows = max(1, len(result.captures))
        panel.resize(PANEL_WIDTH + 30, min(rows * 360 + 40, 30000))
        outputs.resize(*OUTPUT_SIZE)
        panel.show()
        outputs.show()
        panel.show_result(result)
        outputs.show_result(result, meaning, inputs)
        if outputs.meaning_view.isVisible():   # the plot keeps its room above the table
            outputs.resize(OUTPUT_SIZE[0], OUTPUT_TABLE_HEIGHT)
        for _ in range(3):   # layouts settle, panels scrolled away draw (flush)
            app.processEvents()
        panel.flush_visible()
        writes: list[tuple[Path, Callable[[Path], Any]]] = []  # every file, known before any is written
        for (path, call), p in panel.panels().items():
            stem = f"{plot_stem(path)}_call{call}"
            for suffix in (".png", ".svg"):
                writes.append((out / f"{stem}{suffix}", functools.partial(_figure, [p], f"Hookscope {path}")))
            writes.append((out / f"{stem}_histogram.csv", p.hist_tools.export))
            if p.view_kind != "none":
                writes.append((out / f"{stem}_{p.view_kind}.csv", p.view_tools.export))
        if meaning is not None and meaning.kind == DETECTIONS:
            view = outputs.meaning_view.detections
            writes.append((out / "detections.png", lambda f: save_png(view, f)))
        for suffix in (".png", ".svg"):
            writes.append((out / f"output{suffix}", functools.partial(_figure, [outputs], "Hookscope output")))
        writes.append((out / "output.csv", outputs.tools.export))
        if panel.panels():
            for suffix in (".png", ".svg"):
                writes.append((out / f"activations{suffix}",
                               functools.partial(panel.export_figure, beside=outputs)))
        refuse_overwrite([("--save-plots", f) for f, _ in writes], reads or ReadFiles())
        if meaning is not None and meaning.kind == DETECTIONS:
            view.resize(max(view.width(), 640), max(view.height(), 520))
            app.processEvents()
        for target, write in writes:  # each whole or not at all (atomic_write)
            written.append(write(target))
    finally:
        for w in (panel, outputs):
            w.close()
            w.deleteLater()
        app.processEvents()
