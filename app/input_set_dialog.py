"""The file dialog that picks an input set (File → Open inputs…, the Sweep dock's Browse…):
a prompt or batch file, or any image of a folder of images, which stands for its folder."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from PySide6.QtWidgets import QFileDialog, QWidget

from hookscope.core.dataset import IMAGE_PATTERNS, SET_PATTERNS, image_set_root


def input_set_dialog(parent: QWidget, name: str, picked: Callable[[str], Any]) -> QFileDialog:
    """Open (non-modal) the dialog named ``name``; ``picked(path)`` with the file chosen."""
    sets, images = " ".join(SET_PATTERNS), " ".join(IMAGE_PATTERNS)
    dlg = QFileDialog(parent, "Open inputs: a prompt or batch file, or an image of a "
                      "folder of images")
    dlg.setObjectName(name)
    dlg.setFileMode(QFileDialog.FileMode.ExistingFile)
    dlg.setNameFilters([f"Input sets and image folders ({sets} {images})",
                        f"Prompt and batch files ({sets})",
                        f"Images: their folder opens ({images})", "All files (*)"])
    dlg.fileSelected.connect(picked)
    dlg.finished.connect(lambda _r: dlg.deleteLater())
    dlg.open()
    return dlg


def is_image(path: str | Path) -> bool:
    return "*" + Path(path).suffix.lower() in IMAGE_PATTERNS


def set_of(path: str | Path) -> Path:
    """The input set a picked file names: the file itself, or for an image its folder of
    images (with its class subfolders: :func:`image_set_root`)."""
    return image_set_root(path) if is_image(path) else Path(path)
