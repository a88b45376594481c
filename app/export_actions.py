"""File → Export: the last result's captures, and the setup as a PyTorch script.

Kept apart from main_window.py, which holds wiring. Each function takes the
window and, for tests and scripts, an optional path that skips the file dialog.
Mistakes (nothing captured yet, statistics-only mode, a bad file name) are
shown in the window's error banner.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from PySide6.QtWidgets import QFileDialog

from hookscope.core import HookscopeError
from hookscope.core.atomic_write import write_text
from hookscope.core.export import save_captures, standalone_script

if TYPE_CHECKING:
    from .main_window import MainWindow


def export_captures(win: "MainWindow", path: str | None = None) -> Path | None:
    """Save the last result's kept captures to .npz or .safetensors."""
    if win.last_result is None:
        win.show_error("nothing to export yet: run the model first (Ctrl+R)")
        return None
    if path is None:
        path, _ = QFileDialog.getSaveFileName(win, "Export captures", "captures.npz",
                                              "NumPy (*.npz);;safetensors (*.safetensors)")
        if not path:
            return None
    try:
        written = save_captures(win.last_result.captures, path)
    except HookscopeError as exc:
        win.show_error(str(exc))
        return None
    win.statusBar().showMessage(f"captures saved to {written}", 5000)
    return written


def export_script(win: "MainWindow", path: str | None = None) -> Path | None:
    """Write the current model, input and plan as a plain-PyTorch hook script."""
    if win.loaded is None:
        win.show_error("no model is open: use File → Open model…")
        return None
    try:
        text = standalone_script(win.loaded.spec, win.current_plan(), win.run_bar.input_text(),
                                 win.loaded.weights, win.run_bar.device())
    except HookscopeError as exc:
        win.show_error(str(exc))
        return None
    if path is None:
        path, _ = QFileDialog.getSaveFileName(win, "Export as PyTorch script", "hookscope_repro.py",
                                              "Python (*.py)")
        if not path:
            return None
    try:
        write_text(path, text)  # whole or not at all
    except HookscopeError as exc:
        win.show_error(str(exc))
        return None
    win.statusBar().showMessage(f"script written to {path}", 5000)
    return Path(path)
