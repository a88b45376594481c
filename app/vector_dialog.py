"""The steering dialog: a vector from two prompts at one layer, added to that layer.

The vector is this layer's output on prompt A minus on prompt B (at the last
position, or the mean over positions). It is computed where the model runs
(the session's runner: never on the GUI thread), once per layer and pair of
prompts; the dialog then shows its norm. The strength (``alpha``) is the
intervention's draggable parameter: after building, step it in the tree's
Intervention cell like a scale factor, and in Live mode every step re-runs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from PySide6.QtWidgets import (QCheckBox, QComboBox, QDialog, QDialogButtonBox, QDoubleSpinBox,
                               QFormLayout, QLabel, QLineEdit, QPushButton, QWidget)

from hookscope.core import Add, HookscopeError, SteeringVector

if TYPE_CHECKING:
    from hookscope.core import Session

    from .main_window import MainWindow

POSITIONS = {"last position": "diff:", "mean over positions": "diffmean:"}
COMPUTING = "norm: computing (one forward on each prompt)..."


def input_of(text: str, has_tokenizer: bool) -> str:
    """A prompt as an input spec: ``text:PROMPT`` for a model with a tokenizer (a spec typed in
    full, ``text:...`` or a literal, is kept)."""
    return text if text.startswith("text:") or not has_tokenizer else f"text:{text}"


def install_steer_dialog(win: "MainWindow") -> None:
    """The layer tree's *Steer…* opens a :class:`SteerDialog` at that layer."""
    win.tree.steerRequested.connect(lambda path: open_steer_dialog(win, path))


def open_steer_dialog(win: "MainWindow", path: str) -> "SteerDialog":
    """The dialog that builds a vector from two prompts at ``path`` and adds it there; it
    shows the window's results and errors while open."""
    dialog = SteerDialog(win.session, path, win)
    win.resultShown.connect(dialog.show_result)
    win.errorShown.connect(dialog.show_error)
    dialog.finished.connect(lambda _r: dialog.deleteLater())
    dialog.show()
    return dialog


class SteerDialog(QDialog):
    """Prompts A and B, where to read them, the strength; *Build and add* sets ``add`` on
    ``path`` and runs; :meth:`show_result` fills in the vector's norm."""

    def __init__(self, session: "Session", path: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("steerDialog")
        self.setWindowTitle(f"Steer {path}")
        self.session, self.path = session, path
        self.spec: str | None = None
        lm = session.model
        self._tokenizer = lm is not None and lm.meaning.codec is not None
        self.prompt_a, self.prompt_b = QLineEdit(), QLineEdit()
        for edit, hint in ((self.prompt_a, "the cat sat on the"), (self.prompt_b, "the dog sat on the")):
            edit.setPlaceholderText(hint if self._tokenizer else "an input, e.g. [[1.0, 2.0]]")
        self.positions = QComboBox()
        self.positions.addItems(list(POSITIONS))
        self.alpha = QDoubleSpinBox()
        self.alpha.setRange(-1e6, 1e6)
        self.alpha.setDecimals(3)
        self.alpha.setValue(1.0)
        self.norm_units = QCheckBox("alpha in units of the layer's mean activation norm")
        self.norm = QLabel("norm: build the vector to see it")
        self.norm.setWordWrap(True)
        self.build = QPushButton("Build and add")
        for w, name in ((self.prompt_a, "vectorPromptA"), (self.prompt_b, "vectorPromptB"),
                        (self.positions, "vectorPositions"), (self.alpha, "vectorAlpha"),
                        (self.norm_units, "vectorNormUnits"), (self.norm, "vectorNorm"),
                        (self.build, "vectorBuild")):
            w.setObjectName(name)
        self.build.setDefault(True)
        self.build.clicked.connect(self.build_vector)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        buttons.addButton(self.build, QDialogButtonBox.ButtonRole.ActionRole)
        buttons.rejected.connect(self.reject)
        form = QFormLayout(self)
        form.addRow(QLabel(f"Vector = output of <b>{path}</b> on A minus on B."))
        form.addRow("prompt A", self.prompt_a)
        form.addRow("prompt B", self.prompt_b)
        form.addRow("read at", self.positions)
        form.addRow("strength (alpha)", self.alpha)
        form.addRow(self.norm_units)
        form.addRow(self.norm)
        form.addRow(buttons)

    def spec_text(self) -> str:
        """The ``diff:A|B`` spec of the prompts as typed; a :class:`HookscopeError` if one is
        empty or A holds the ``|`` that separates them."""
        a, b = self.prompt_a.text(), self.prompt_b.text()
        if not a.strip() or not b.strip():
            raise HookscopeError("type both prompts: the vector is the layer's output on A minus on B")
        if "|" in a:
            raise HookscopeError("prompt A may not hold '|' (it separates A from B)")
        prefix = POSITIONS[self.positions.currentText()]
        return f"{prefix}{input_of(a, self._tokenizer)}|{input_of(b, self._tokenizer)}"

    def build_vector(self) -> None:
        """Set ``add`` with this vector on the layer and run (the runner computes the vector)."""
        try:
            spec = self.spec_text()
            iv = Add(spec, self.alpha.value(), self.norm_units.isChecked())
        except HookscopeError as exc:
            self.norm.setText(str(exc))
            return
        self.spec = spec
        self.norm.setText(COMPUTING)
        self.session.intervene(self.path, iv)
        if not self.session.options.live:  # Live runs on the change by itself
            self.session.submit_run()
        last = self.session.last_result  # Live does not re-run a plan that did not change:
        if last is not None:  # the last result may hold this very vector already
            self.show_result(last)

    def show_error(self, message: str) -> None:
        """A run failed while this dialog waited for its vector: say why instead of waiting."""
        if self.norm.text() == COMPUTING:
            self.norm.setText(message.split("\n", 1)[0])

    def show_result(self, result: Any) -> None:
        """A run finished: show the norm of this dialog's vector, if the run built it."""
        plan = result.plan
        iv = plan.intervention_for(self.path) if plan is not None else None
        vec = iv.vector if isinstance(iv, Add) else None
        if self.spec is None or not isinstance(vec, SteeringVector) or vec.source != self.spec:
            return
        self.norm.setText(f"vector {vec.name}: norm |v| = {vec.norm:.4g} over {vec.size} features "
                          f"({self.positions.currentText()}); step alpha in the Intervention cell")
