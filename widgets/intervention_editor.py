"""The tree's Intervention cell editor: a kind chooser and that kind's parameters.

The editor is generated from the registry (:func:`hookscope.core.kinds`) and
each kind's :meth:`~hookscope.core.Intervention.params`, so a new kind shows
up here with no change to this file. A float parameter gets a spin box (its arrows, the
wheel and the keyboard change it step by step, and in Live mode every step
re-runs), an integer one an integer spin box, anything else a line of text
(``3, 7`` for a list of units). Every kind also gets an ``at`` line: where inside
the output it acts, written as the command line's suffix (``@pos=-1@heads=0,5``;
empty: everywhere). The delegate commits every change at once; the steps of one
editing session are one undo step.

The fields flow left to right and wrap onto further rows when the tree is narrower
than one row (each label stays with its field), so no field ever lies over another;
the editor then grows downwards over the rows below the edited one.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from PySide6.QtCore import (QAbstractItemModel, QModelIndex, QPersistentModelIndex, QRect,
                            QSortFilterProxyModel, Qt, Signal)
from PySide6.QtGui import QMouseEvent
from PySide6.QtWidgets import (QComboBox, QDoubleSpinBox, QHBoxLayout, QLabel,
                               QLineEdit, QSpinBox, QStyledItemDelegate, QStyleOptionViewItem,
                               QWidget)

from hookscope.core import At, HookscopeError, Intervention, kinds
from hookscope.core.base import typed_text

from .flow_layout import FlowLayout
from .param_fields import read_param, show_param

NONE = "none"


@dataclasses.dataclass
class _Spec:
    """One parameter as the editor sees it: ``how`` is ``float``, ``int`` or ``text``."""

    name: str
    how: str
    start: Any
    optional: bool = False


def param_specs(cls: type[Intervention]) -> list[_Spec]:
    """The parameters of an intervention kind, from its parameter metadata (``cls.params()``)."""
    return [_Spec(p.name, p.type if p.type in ("float", "int") else "text", p.start, p.optional)
            for p in cls.params()]


class InterventionEditor(QWidget):
    """``interventionKind`` combo plus one ``param_<name>`` widget per parameter."""

    changed = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("interventionEditor")
        self.setAutoFillBackground(True)
        self._kinds = kinds()
        self._lay = FlowLayout(self, spacing=3)
        self._lay.setContentsMargins(1, 0, 1, 0)
        self.kind_combo = QComboBox(objectName="interventionKind")  # type: ignore[call-arg]  # PySide6 stubs omit property kwargs
        self.kind_combo.setMinimumContentsLength(7)   # "project" whole, not an arrow
        self.kind_combo.addItem(NONE)
        for kind in sorted(self._kinds):
            self.kind_combo.addItem(kind)
            doc = (self._kinds[kind].__doc__ or "").strip().splitlines()
            self.kind_combo.setItemData(self.kind_combo.count() - 1, doc[0] if doc else kind,
                                        Qt.ItemDataRole.ToolTipRole)
        self._lay.addWidget(self.kind_combo)
        self._params: dict[str, tuple[str, QWidget]] = {}
        self._given: dict[str, tuple[str, Any]] = {}  # text params: (text shown, value shown)
        self._extra: list[QWidget] = []
        self.kind_combo.currentTextChanged.connect(self._on_kind)

    _cell: QRect | None = None

    def fit_to_cell(self, cell: QRect | None = None) -> None:
        """Sit on ``cell`` (the last one when ``None``); wider than the cell, slide left over
        the names so every label and field stays whole ("factor", never "fac"); wider than
        the view, take the view's width and wrap the fields onto more rows, growing down
        over the rows below (up, where the view ends first)."""
        self._cell = QRect(cell) if cell is not None else self._cell  # the option's rect is a loan
        r = self._cell
        if r is None:
            return
        self._lay.activate()   # fields added since the last layout counted
        width = max(r.width(), self._lay.sizeHint().width())
        parent = self.parentWidget()
        room = parent.width() if parent is not None else width
        height_room = parent.height() if parent is not None else r.bottom()
        width = min(width, max(room, r.width()))
        height = max(r.height(), self._lay.heightForWidth(width))
        y = r.y() if r.y() + height <= height_room else max(0, height_room - height)
        self.setGeometry(max(0, min(r.x(), room - width)), y, width, height)
        self.raise_()

    def mousePressEvent(self, event: QMouseEvent) -> None:  # noqa: N802 - Qt override
        """Kept here: a press a field lets pass (a spin box's text, a gap between fields)
        would reach the tree under the editor's second row, pick that row and close the
        editor."""
        event.accept()

    # -- value ---------------------------------------------------------------------
    def set_value(self, iv: Intervention | None) -> None:
        """Show ``iv`` (no ``changed``)."""
        self.blockSignals(True)
        try:
            kind = iv.name if iv is not None else NONE
            if self.kind_combo.currentText() != kind:
                self.kind_combo.setCurrentText(kind)
            self._build(kind, iv)
        finally:
            self.blockSignals(False)

    def value(self) -> Intervention | None:
        """The intervention the editor shows; raises :class:`HookscopeError` for bad parameters."""
        kind = self.kind_combo.currentText()
        if kind == NONE:
            return None
        cls = self._kinds[kind]
        params: dict[str, Any] = {}
        for name, (how, w) in self._params.items():
            params[name] = read_param(how, w, self._given.get(name, (None, None)))
        try:
            iv = cls.from_values(params)
        except (TypeError, ValueError) as exc:
            raise HookscopeError(f"{kind}: {exc}") from exc
        at = self._at_value()
        return iv if at is None else dataclasses.replace(iv, at=at)  # type: ignore[type-var]

    def _at_value(self) -> At | None:
        """The ``at`` line read as the command line's suffix (``@`` before the first key optional)."""
        w = self._at_edit
        text = w.text().strip() if w is not None else ""
        if not text:
            return None
        at = At.parse_suffix(text if text.startswith("@") else "@" + text)
        return None if at.everywhere() else at

    # -- building ------------------------------------------------------------------
    def _on_kind(self, kind: str) -> None:
        where = self._at_edit.text() if self._at_edit is not None else ""
        self._build(kind, None)
        if self._at_edit is not None:  # another kind, the same place
            self._set_widget("text", self._at_edit, where or None)
        self.changed.emit()

    def _build(self, kind: str, iv: Intervention | None) -> None:
        cls = self._kinds.get(kind)
        specs = param_specs(cls) if cls is not None else []
        if not (self._shown == kind and list(self._params) == [p.name for p in specs]):
            for w in self._extra:
                self._lay.removeWidget(w)
                w.deleteLater()
            self._extra, self._params, self._at_edit = [], {}, None
            for spec in specs:
                self._add_param(spec)
            if cls is not None:
                self._add_at()
            # Shown now, not on Qt's queued show: the layout counts only shown fields, and
            # fit_to_cell below sizes the editor from it (else a kind picked in the cell
            # leaves the editor as narrow as the cell, its new fields clipped).
            for w in self._extra:
                w.show()
        self._shown = kind
        values = iv.values() if iv is not None else {}
        self._given = {}
        for name, (how, w) in self._params.items():
            if name in values:
                self._set_widget(how, w, values[name])
                if how == "text" and values[name] is not None:
                    self._given[name] = (typed_text(w.text()), values[name])  # type: ignore[attr-defined]
        if self._at_edit is not None:
            at = iv.where() if iv is not None else None
            self._set_widget("text", self._at_edit, at.suffix() if at is not None else None)
        self.fit_to_cell()

    _at_edit: QLineEdit | None = None

    def _add_pair(self, label: QLabel, field: QWidget) -> None:
        """``label`` and its ``field`` side by side, one piece of the flow (never parted)."""
        pair = QWidget(self)
        row = QHBoxLayout(pair)
        row.setContentsMargins(0, 0, 0, 0)
        row.setSpacing(3)
        row.addWidget(label)
        row.addWidget(field, 1)
        self._lay.addWidget(pair)
        self._extra.append(pair)

    def _add_at(self) -> None:
        label = QLabel("at")
        label.setMinimumWidth(label.sizeHint().width())
        w = QLineEdit()
        w.setObjectName("param_at")
        w.setPlaceholderText("@pos=-1@heads=0,5")
        w.setMinimumWidth(w.fontMetrics().horizontalAdvance("@pos=-1@heads=0") + 8)
        w.setToolTip("Where inside the output: @pos=SEL (token positions), @heads=SEL (attention "
                     "heads), @units=SEL (features); SEL: 0,5 or 3:6 or -1 or last or all. "
                     "Empty: the whole output.")
        w.editingFinished.connect(self.changed)
        self._add_pair(label, w)
        self._at_edit = w

    _shown = NONE

    def _add_param(self, spec: _Spec) -> None:
        how = spec.how
        label = QLabel(spec.name)
        label.setMinimumWidth(label.sizeHint().width())   # "factor", never "fac"
        w: QWidget
        if how == "float":
            w = QDoubleSpinBox()
            w.setRange(-1e9, 1e9)
            w.setDecimals(4)
            w.setSingleStep(0.05)
            w.setKeyboardTracking(False)
            w.setMinimumWidth(w.sizeHint().width())
            w.valueChanged.connect(lambda _v: self.changed.emit())
        elif how == "int":
            w = QSpinBox()
            w.setRange(-2**31, 2**31 - 1)
            w.valueChanged.connect(lambda _v: self.changed.emit())
        else:
            w = QLineEdit()
            w.setMinimumWidth(w.fontMetrics().horizontalAdvance("(none)_") + 8)
            w.setPlaceholderText("(none)" if spec.optional else "")
            w.editingFinished.connect(self.changed)
        w.setObjectName(f"param_{spec.name}")
        self._set_widget(how, w, None if how == "text" and spec.optional else spec.start)
        self._add_pair(label, w)
        self._params[spec.name] = (how, w)

    _set_widget = staticmethod(show_param)


class InterventionDelegate(QStyledItemDelegate):
    """Edits the Intervention column with an :class:`InterventionEditor`; every
    change is written to the model at once (so Live re-runs while a value is stepped)."""

    def createEditor(self, parent: QWidget, option: QStyleOptionViewItem,  # noqa: N802
                     index: QModelIndex | QPersistentModelIndex) -> QWidget:
        editor = InterventionEditor(parent)
        editor.changed.connect(lambda e=editor: self.commitData.emit(e))
        return editor

    def setEditorData(self, editor: QWidget, index) -> None:  # noqa: N802
        iv = index.data(Qt.ItemDataRole.EditRole)
        try:
            same = editor.value() == iv  # type: ignore[attr-defined]
        except HookscopeError:
            same = False
        if not same:
            editor.set_value(iv)  # type: ignore[attr-defined]

    def setModelData(self, editor: QWidget, model: QAbstractItemModel, index) -> None:  # noqa: N802
        try:
            iv = editor.value()  # type: ignore[attr-defined]
        except HookscopeError as exc:
            src = model.sourceModel() if isinstance(model, QSortFilterProxyModel) else model
            if hasattr(src, "errorOccurred"):
                src.errorOccurred.emit(str(exc))
            return
        if index.data(Qt.ItemDataRole.EditRole) != iv:
            model.setData(index, iv, Qt.ItemDataRole.EditRole)

    def initStyleOption(self, option: QStyleOptionViewItem, index) -> None:  # noqa: N802
        super().initStyleOption(option, index)
        # the kind first: "zero @pos=-1@he…" reads better than "zero …s=0,2" (full text: tooltip)
        option.textElideMode = Qt.TextElideMode.ElideRight  # type: ignore[attr-defined]

    def updateEditorGeometry(self, editor: QWidget, option: QStyleOptionViewItem, index) -> None:  # noqa: N802
        editor.fit_to_cell(option.rect)  # type: ignore[attr-defined]
