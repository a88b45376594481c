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

import os
import re
from pathlib import Path
from typing import Any

from hookscope.core import HookscopeError, RunResult
from hookscope.core.meaning import DETECTIONS, OutputMeaning

PANEL_WIDTH = 1000   # px: side by side, each plot ~480 px
OUTPUT_SIZE = (800, 520)   # px: the output panel; a table under the plot gets more height
OUTPUT_TABLE_HEIGHT = 900


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name) or "model"


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
    from .qt_compat import guard_none_refcount

    guard_none_refcount()
    from PySide6.QtWidgets import QApplication

    return QApplication.instance() or QApplication(["hookscope"])


def save_plots(result: RunResult, folder: str | Path, meaning: OutputMeaning | None = None,
               inputs: Any = None) -> list[Path]:
    """Write ``result``'s plots into ``folder``; returns the files written. With a detector's
    ``meaning`` and its ``inputs`` also ``detections.png``: the boxes on the input image."""
    out = plots_folder(folder)
    app = _app()
    from hookscope.widgets.activation_panel import ActivationPanel
    from hookscope.widgets.figure_export import write_figure
    from hookscope.widgets.output_comparison import OutputComparison

    panel, outputs = ActivationPanel(), OutputComparison()
    written: list[Path] = []
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
        for (path, call), p in panel.panels().items():
            stem = f"{_safe(path)}_call{call}"
            for suffix in (".png", ".svg"):
                written.append(write_figure(out / f"{stem}{suffix}", [p], f"Hookscope {path}"))
            written.append(p.hist_tools.export(out / f"{stem}_histogram.csv"))
            if p.view_kind != "none":
                written.append(p.view_tools.export(out / f"{stem}_{p.view_kind}.csv"))
        if meaning is not None and meaning.kind == DETECTIONS:
            view = outputs.meaning_view.detections
            view.resize(max(view.width(), 640), max(view.height(), 520))
            app.processEvents()
            target = out / "detections.png"
            if not view.grab().save(str(target)):
                raise HookscopeError(f"--save-plots: cannot write {target}")
            written.append(target)
        for suffix in (".png", ".svg"):
            written.append(write_figure(out / f"output{suffix}", [outputs], "Hookscope output"))
        written.append(outputs.tools.export(out / "output.csv"))
        if panel.panels():
            for suffix in (".png", ".svg"):
                written.append(panel.export_figure(out / f"activations{suffix}", beside=outputs))
    finally:
        for w in (panel, outputs):
            w.close()
            w.deleteLater()
        app.processEvents()
    return written
