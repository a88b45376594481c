"""File → Export: the last result's captures, and the setup as a PyTorch script.

Kept apart from main_window.py, which holds wiring. Each function takes the
window and, for tests and scripts, an optional path that skips the file dialog.
Mistakes (nothing captured yet, statistics-only mode, a bad file name) are
shown in the window's error banner.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING


from hookscope.core import HookscopeError
from hookscope.core.export import save_captures, standalone_script
from hookscope.widgets.last_folder import pick_file

if TYPE_CHECKING:
    from .main_window import MainWindow


def export_captures(win: "MainWindow", path: str | None = None) -> Path | None:
    """Save the last result's kept captures to .npz or .safetensors."""
    if win.last_result is None:
        win.show_error("nothing to export yet: run the model first (Ctrl+R)")
        return None
    if path is None:
        path = pick_file(win, "export", "Export captures", "NumPy (*.npz);;safetensors (*.safetensors)",
                         save=True, file_name="captures.npz")
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
        path = pick_file(win, "export", "Export as PyTorch script", "Python (*.py)", save=True,
                         file_name="hookscope_repro.py")
        if not path:
            return None
    try:
        Path(path).write_text(text)
    except OSError as exc:
        win.show_error(f"cannot write {path}: {exc.strerror or exc}")
        return None
    win.statusBar().showMessage(f"script written to {path}", 5000)
    return Path(path)
