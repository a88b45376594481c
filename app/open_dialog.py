"""File → Open model…: a model spec typed or picked, and optional weights.

The dialog only collects text; loading happens on the worker thread, and a
bad spec comes back as the core's message in the error banner. Its file
pickers start in the folder the last one ended in (QSettings).
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import TYPE_CHECKING

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (QCheckBox, QComboBox, QDialog, QDialogButtonBox, QFormLayout,
                               QHBoxLayout, QLabel, QLineEdit, QPushButton, QWidget)

from hookscope.core import demo_names
from hookscope.core.demos import DEMO_DESCRIPTIONS
from hookscope.widgets.last_folder import pick_file

if TYPE_CHECKING:
    from .main_window import MainWindow


def factory_names(path: str | Path) -> list[str]:
    """Top-level function names in a Python file (candidates for ``file.py:NAME``)."""
    try:
        tree = ast.parse(Path(path).read_text(encoding="utf-8"))
    except (OSError, SyntaxError, ValueError):
        return []
    return [n.name for n in tree.body
            if isinstance(n, ast.FunctionDef) and not n.name.startswith("_")]


def ask_and_load(win: "MainWindow") -> None:
    """File → Open model…: ask for a spec (the open model's filled in) and load it."""
    m = win.session.model
    dlg = OpenModelDialog(win, spec=m.spec if m else "", weights=m.weights if m else None)
    if dlg.exec() == QDialog.DialogCode.Accepted and dlg.spec():
        win.load(dlg.spec(), dlg.weights(), trust_pickle=dlg.trust_pickle())


class OpenModelDialog(QDialog):
    """Spec (``specEdit``, editable combo with the demos), weights (``weightsEdit``), trust flag."""

    def __init__(self, parent: QWidget | None = None, spec: str = "", weights: str | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("openModelDialog")
        self.setWindowTitle("Open model")
        self.setMinimumWidth(560)
        form = QFormLayout(self)

        self.spec_combo = QComboBox(objectName="specEdit")  # type: ignore[call-arg]  # stubs omit Qt-property kwargs
        self.spec_combo.setEditable(True)
        for name in demo_names():
            self.spec_combo.addItem(f"demo:{name}")
            self.spec_combo.setItemData(self.spec_combo.count() - 1, DEMO_DESCRIPTIONS.get(name, ""),
                                        Qt.ItemDataRole.ToolTipRole)
        self.spec_combo.setEditText(spec)
        browse = QPushButton("Browse…", objectName="specBrowse")  # type: ignore[call-overload]  # stubs omit Qt-property kwargs
        browse.clicked.connect(self._browse_model)
        row = QHBoxLayout()
        row.addWidget(self.spec_combo, 1)
        row.addWidget(browse)
        form.addRow("Model", row)

        self.hint = QLabel("demo:NAME, path/to/file.py:factory, package.module:factory, or a "  # type: ignore[call-overload]  # stubs omit Qt-property kwargs
                           "torch.export .pt2 file", objectName="specHint")
        self.hint.setWordWrap(True)
        form.addRow("", self.hint)

        self.weights_edit = QLineEdit(objectName="weightsEdit")  # type: ignore[call-overload]  # stubs omit Qt-property kwargs
        self.weights_edit.setPlaceholderText("optional state_dict (.pt, .pth, .safetensors) for a factory")
        self.weights_edit.setText(weights or "")
        wbrowse = QPushButton("Browse…", objectName="weightsBrowse")  # type: ignore[call-overload]  # stubs omit Qt-property kwargs
        wbrowse.clicked.connect(self._browse_weights)
        wrow = QHBoxLayout()
        wrow.addWidget(self.weights_edit, 1)
        wrow.addWidget(wbrowse)
        form.addRow("Weights", wrow)

        self.trust = QCheckBox("Trust this file: allow a full pickle (.pt holding a module runs "  # type: ignore[call-overload]  # stubs omit Qt-property kwargs
                               "code from the file)", objectName="trustPickle")
        form.addRow("", self.trust)

        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Open
                                   | QDialogButtonBox.StandardButton.Cancel)
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        form.addRow(buttons)

    def _browse_model(self) -> None:
        path = pick_file(self, "model", "Open model",
                         "Models (*.py *.pt2 *.pt *.pth);;Python factory (*.py);;"
                         "torch.export program (*.pt2);;All files (*)")
        if path:
            self.set_model_file(path)

    def set_model_file(self, path: str) -> None:
        """Put a picked file into the spec; for a .py, name a factory in it."""
        if path.endswith(".py"):
            names = factory_names(path)
            self.spec_combo.setEditText(f"{path}:{names[0] if names else ''}")
            self.hint.setText(("Functions in this file: " + ", ".join(names[:12])
                               + ". The one after the colon must return the model.")
                              if names else "Write the factory function's name after the colon.")
        else:
            self.spec_combo.setEditText(path)

    def _browse_weights(self) -> None:
        path = pick_file(self, "weights", "Weights",
                         "State dicts (*.pt *.pth *.safetensors);;All files (*)")
        if path:
            self.weights_edit.setText(path)

    def spec(self) -> str:
        return self.spec_combo.currentText().strip()

    def weights(self) -> str | None:
        return self.weights_edit.text().strip() or None

    def trust_pickle(self) -> bool:
        return self.trust.isChecked()
