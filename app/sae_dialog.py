"""File → Attach SAE's question: which SAE, typed or browsed.

The command line takes a folder or ``demo`` (the SAE shipped for ``demo:lm``);
so does this dialog: a field (``demo`` already in it for ``demo:lm``, else the
last folder an SAE came from) and Browse… for the folder picker. A folder-only
picker could not say ``demo``.
"""

from __future__ import annotations

from PySide6.QtWidgets import (QDialog, QDialogButtonBox, QFileDialog, QHBoxLayout, QLabel,
                               QLineEdit, QPushButton, QVBoxLayout, QWidget)

from hookscope.core.model.sae import DEMO_SAE
from hookscope.widgets.last_folder import last_folder, remember


class AttachSaeDialog(QDialog):
    """Object name ``attachSaeDialog``; the field ``saeFolder``, the button ``saeBrowse``."""

    def __init__(self, parent: QWidget | None, layer: str, demo_model: bool) -> None:
        super().__init__(parent)
        self.setObjectName("attachSaeDialog")
        self.setWindowTitle("Attach SAE")
        self.folder = QLineEdit(DEMO_SAE if demo_model else "")
        self.folder.setObjectName("saeFolder")
        self.folder.setPlaceholderText("a folder with cfg.json and sae_weights.safetensors, or demo")
        self.folder.setMinimumWidth(self.folder.fontMetrics().horizontalAdvance("x" * 48))
        browse = QPushButton("Browse…")
        browse.setObjectName("saeBrowse")
        browse.clicked.connect(self.browse)
        row = QHBoxLayout()
        row.addWidget(self.folder, 1)
        row.addWidget(browse)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok
                                   | QDialogButtonBox.StandardButton.Cancel)
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        lay = QVBoxLayout(self)
        lay.addWidget(QLabel(f"The SAE to attach to <b>{layer}</b> (SAELens folder; "
                             f"<code>{DEMO_SAE}</code>: the one shipped for demo:lm):"))
        lay.addLayout(row)
        lay.addWidget(buttons)

    def browse(self) -> None:
        dlg = QFileDialog(self, "Attach SAE (a folder with cfg.json and sae_weights.safetensors)",
                          last_folder("sae"))
        dlg.setObjectName("fileDialog")
        dlg.setFileMode(QFileDialog.FileMode.Directory)
        dlg.setOption(QFileDialog.Option.ShowDirsOnly, True)
        if dlg.exec() and dlg.selectedFiles():
            remember("sae", dlg.selectedFiles()[0])
            self.folder.setText(dlg.selectedFiles()[0])

    def chosen(self) -> str:
        return self.folder.text().strip()
